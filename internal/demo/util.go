package demo

import (
	"io"
	"net/http"
	"strings"
)

func readAll(resp *http.Response) ([]byte, error) {
	return io.ReadAll(io.LimitReader(resp.Body, 1<<20))
}

func trimNL(s string) string { return strings.TrimRight(s, "\n") }
