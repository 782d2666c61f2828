package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/qualifyd/qualifyd/internal/api"
)

// apiClient talks to a running daemon's HTTP API.
type apiClient struct {
	base  string // http://host:port
	token string
	http  *http.Client
}

// clientFlags registers --http and --token-file on fs and returns a
// function building the client once fs is parsed.
func clientFlags(fs *flag.FlagSet) func() (*apiClient, error) {
	addr := fs.String("http", "127.0.0.1:8089", "address of the running daemon's HTTP API")
	tokenFile := fs.String("token-file", "", "file holding the API's bearer token (for write routes)")
	return func() (*apiClient, error) {
		c := &apiClient{base: "http://" + *addr, http: &http.Client{Timeout: 60 * time.Second}}
		if strings.HasPrefix(*addr, "http://") || strings.HasPrefix(*addr, "https://") {
			c.base = strings.TrimSuffix(*addr, "/")
		}
		if *tokenFile != "" {
			b, err := os.ReadFile(*tokenFile)
			if err != nil {
				return nil, fmt.Errorf("--token-file: %w", err)
			}
			c.token = string(bytes.TrimSpace(b))
		}
		return c, nil
	}
}

// parseClient parses the flags of the client command name (--http,
// --token-file, and those each of extra registers) and its positional
// arguments, which valid checks, and builds the client. On an error it
// prints usage (or the error) and returns exit code 2.
func parseClient(name, usage string, args []string, stderr io.Writer, valid func(pos []string) bool, extra ...func(*flag.FlagSet)) (*apiClient, []string, int) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = usageFunc(fs, name+" "+usage)
	client := clientFlags(fs)
	for _, f := range extra {
		f(fs)
	}
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return nil, nil, usageExit(err)
	}
	if !valid(pos) {
		fmt.Fprintln(stderr, "usage: qualifyd "+name+" "+usage)
		return nil, nil, 2
	}
	c, err := client()
	if err != nil {
		fmt.Fprintf(stderr, "qualifyd %s: %v\n", name, err)
		return nil, nil, 2
	}
	return c, pos, 0
}

// do sends method to path and decodes a 2xx JSON answer into out, one of
// internal/api's objects.
func (c *apiClient) do(ctx context.Context, method, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, nil)
	if err != nil {
		return err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("is qualifyd running? %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		var e api.ErrorReply
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, e.Error)
		}
		return fmt.Errorf("%s %s: %s", method, path, resp.Status)
	}
	return json.Unmarshal(body, out)
}
