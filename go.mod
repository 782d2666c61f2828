module github.com/qualifyd/qualifyd

go 1.26
