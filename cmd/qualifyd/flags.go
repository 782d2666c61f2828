package main

import (
	"errors"
	"flag"
	"fmt"
)

// parseInterspersed parses args with fs, allowing flags after positional
// arguments ("check URI --timeout 1"), and returns the positional ones. A
// lone "--" ends flag parsing.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// usageExit is the exit code of a command whose flags did not parse: 0
// when they asked for -h (the usage is printed), 2 otherwise.
func usageExit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return 2
}

// usageFunc is fs's -h: "usage: qualifyd " and synopsis, then the flags.
// The man page qualifyd(8) is made of these.
func usageFunc(fs *flag.FlagSet, synopsis string) func() {
	return func() {
		fmt.Fprintln(fs.Output(), "usage: qualifyd "+synopsis)
		fs.PrintDefaults()
	}
}
