module github.com/ctxtier/ctxtier

go 1.26
