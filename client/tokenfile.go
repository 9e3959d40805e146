package client

import (
	"errors"
	"fmt"
	"strings"

	"github.com/terdut-server/terdut-server/internal/secretfile"
)

// maxTokenFileBytes bounds the operator token file; a projected token is about 1 KiB.
const maxTokenFileBytes = 64 << 10

// operatorToken returns the Bearer token of an operator request: the one given, or the
// content of the token file, read now.
func (c *Client) operatorToken(op string) (string, error) {
	if c.tokenFile == "" {
		return c.token, nil
	}
	token, err := readTokenFile(c.tokenFile)
	if err != nil {
		return "", fmt.Errorf("terdut-server %s: the operator token file %s: %w", op, c.tokenFile, err)
	}
	return token, nil
}

// readTokenFile reads a token file without blocking on a FIFO, and checks that what it
// holds can be sent as a Bearer token. Its errors never quote the file.
func readTokenFile(path string) (string, error) {
	b, err := secretfile.Read(path, maxTokenFileBytes)
	if err != nil {
		return "", err
	}
	token := strings.TrimSpace(string(b))
	switch {
	case token == "":
		return "", errors.New("it holds no token")
	case !headerSafe(token):
		return "", errors.New("it holds spaces, control characters or non-ASCII characters inside the token")
	}
	return token, nil
}
