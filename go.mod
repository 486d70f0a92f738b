module github.com/wagent/wagent

go 1.25.0
