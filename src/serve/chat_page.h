// GET /: a chat page, plain HTML and JavaScript in one document with nothing fetched from elsewhere (plumb
// serve may run where nothing outside can be reached). It sends the conversation to /v1/chat/completions
// with "stream": true, shows the answer as its chunks arrive, keeps the conversation, and prints the
// stats `plumb chat` prints, from the last chunk's usage and the browser's clock (docs/serve.md, "Chat
// page").
#pragma once

#include <string_view>

namespace httplib {
class Server;
}

namespace plumb::serve {

// The page (UTF-8 HTML).
std::string_view ChatPageHtml();

// Adds GET /, served with a Content-Security-Policy that lets the page reach this server
// alone.
void RegisterChatPage(httplib::Server& http);

}  // namespace plumb::serve
