package main

import (
	"fmt"
	"os/exec"
	"strings"
)

// command is one subcommand as its own help describes it.
type command struct {
	// Name and Summary come from the list `qualifyd help` prints.
	Name, Summary string
	// Usage holds the help's "usage: qualifyd ..." lines, without "usage: ".
	Usage []string
	// Flags are the flags the help lists, in its order.
	Flags []flagHelp
	// Text holds the help's other lines, as printed.
	Text []string
}

// flagHelp is one flag of a command: its name without dashes, the name of
// its value ("" for a boolean) and its description.
type flagHelp struct {
	Name, Arg, Desc string
}

// noFlags lists the commands whose -h is not a help: `qualifyd version -h`
// prints the version, as `qualifyd version` does.
var noFlags = map[string]bool{"version": true}

// helpOf runs bin to read every command's help: the command list of
// `bin help`, then `bin NAME -h` for each. The exit codes are not checked (a
// command's -h exits 0 or 2); an empty help is an error.
func helpOf(bin string) ([]command, error) {
	list, err := output(bin, "help")
	if err != nil {
		return nil, err
	}
	cmds, err := parseCommandList(list)
	if err != nil {
		return nil, fmt.Errorf("%s help: %w", bin, err)
	}
	for i := range cmds {
		if noFlags[cmds[i].Name] {
			continue
		}
		text, err := output(bin, cmds[i].Name, "-h")
		if err != nil {
			return nil, err
		}
		parseHelp(&cmds[i], text)
	}
	return cmds, nil
}

// output is what bin with args prints on stdout and stderr; it fails only
// when bin does not run or prints nothing.
func output(bin string, args ...string) (string, error) {
	out, err := exec.Command(bin, args...).CombinedOutput()
	if _, exited := err.(*exec.ExitError); err != nil && !exited {
		return "", fmt.Errorf("%s %s: %w", bin, strings.Join(args, " "), err)
	}
	if len(out) == 0 {
		return "", fmt.Errorf("%s %s: printed nothing", bin, strings.Join(args, " "))
	}
	return string(out), nil
}

// parseCommandList reads the "commands:" list of `qualifyd help`: one
// "  NAME  SUMMARY" line per command.
func parseCommandList(text string) ([]command, error) {
	_, list, ok := strings.Cut(text, "\ncommands:\n")
	if !ok {
		return nil, fmt.Errorf("no \"commands:\" list in %q", text)
	}
	var cmds []command
	for line := range strings.Lines(list) {
		name, summary, _ := strings.Cut(strings.TrimSpace(line), " ")
		if name != "" {
			cmds = append(cmds, command{Name: name, Summary: strings.TrimSpace(summary)})
		}
	}
	if len(cmds) == 0 {
		return nil, fmt.Errorf("empty \"commands:\" list in %q", text)
	}
	return cmds, nil
}

// parseHelp fills c from the text its -h prints: usage lines, then the
// flags as Go's flag.PrintDefaults writes them ("  -name type" and
// "    \tdescription" lines). flag's "Usage of NAME:" header is dropped.
func parseHelp(c *command, text string) {
	for line := range strings.Lines(text) {
		line = strings.TrimRight(line, "\n")
		trimmed := strings.TrimSpace(line)
		switch {
		case trimmed == "" || trimmed == "Usage of "+c.Name+":":
		case strings.HasPrefix(trimmed, "usage: "):
			c.Usage = append(c.Usage, strings.TrimPrefix(trimmed, "usage: "))
		case strings.HasPrefix(line, " ") && strings.HasPrefix(trimmed, "qualifyd ") && len(c.Usage) > 0:
			c.Usage = append(c.Usage, trimmed)
		case strings.HasPrefix(line, "  -"):
			c.Flags = append(c.Flags, parseFlagLine(trimmed))
		case strings.HasPrefix(line, "    \t") && len(c.Flags) > 0:
			f := &c.Flags[len(c.Flags)-1]
			f.Desc = strings.TrimSpace(f.Desc + " " + trimmed)
		default:
			c.Text = append(c.Text, trimmed)
		}
	}
}

// parseFlagLine reads "-name type", "-name" or flag's one-line form for
// one-letter names, "-x type\tdescription".
func parseFlagLine(s string) flagHelp {
	head, desc, _ := strings.Cut(s, "\t")
	name, arg, _ := strings.Cut(strings.TrimPrefix(head, "-"), " ")
	return flagHelp{Name: name, Arg: strings.TrimSpace(arg), Desc: strings.TrimSpace(desc)}
}
