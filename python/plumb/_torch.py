"""Tensors between numpy and torch, for the torch front end (Case.inputs(framework="torch"), Case.check).

torch is imported only here, only when asked for: the package does not depend on it. BF16 travels as its
bits both ways (a uint16 array is viewed as torch.bfloat16 and back), so no value is ever rounded."""
import numpy as np


def torch_module():
    try:
        import torch
    except ImportError as e:
        raise ImportError("framework='torch' needs PyTorch (pip install torch)") from e
    return torch


def to_torch(array, bf16, device):
    """A numpy array as a torch tensor on `device`; bf16=True views uint16 bits as torch.bfloat16."""
    torch = torch_module()
    a = np.ascontiguousarray(array)
    if bf16:
        t = torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    elif a.dtype == np.uint16:  # torch's uint16 has few ops: the values widen to int32, losslessly
        t = torch.from_numpy(a.astype(np.int32))
    else:
        t = torch.from_numpy(a)
    return t.to(device) if device is not None else t


def to_numpy(value):
    """A result for verify as numpy: torch tensors (any device, bfloat16 as uint16 bits) or array-likes."""
    if type(value).__module__.split(".")[0] != "torch":
        return value
    torch = torch_module()
    t = value.detach().to("cpu").contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16)
    return t.numpy()
