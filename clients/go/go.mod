module github.com/ferrymq/ferry-go

go 1.23
