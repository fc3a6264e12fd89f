module github.com/ferrymq/ferry/clients/go

go 1.24

require github.com/coder/websocket v1.8.15

require go.uber.org/goleak v1.3.0
