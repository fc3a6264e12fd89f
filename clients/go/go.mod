module github.com/ferrymq/ferry/clients/go

go 1.24

require github.com/coder/websocket v1.8.15
