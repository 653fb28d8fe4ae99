package control

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
)

// Listen opens the server's listener on addr (host:port; port 0 picks a
// free one). A host that is not a loopback address — an empty one, which
// means every interface, included — is refused unless hasToken: a job
// reachable from the network must not be stoppable by anyone who reaches
// it.
func Listen(addr string, hasToken bool) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("address %q is not host:port: use for instance 127.0.0.1:8081", addr)
	}
	if !hasToken && !loopback(host) {
		return nil, fmt.Errorf("address %q is not a loopback address and no token is set: set a token, or bind to 127.0.0.1:PORT", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("address %q: %w: give a free host:port", addr, err)
	}
	return ln, nil
}

// LoopbackAddr reports whether addr, host:port, names only loopback
// addresses (where only local users can connect).
func LoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	return err == nil && loopback(host)
}

// loopback reports whether host names only loopback addresses.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// LoadToken returns the bearer token from file (its content, without
// surrounding white space) or, when file is empty, from the environment
// variable env; "" when both are empty. A file or variable that is set but
// holds no token is an error, so that a typo does not leave the job
// without the token its operator meant it to have.
func LoadToken(file, env string) (string, error) {
	if file != "" && env != "" {
		return "", fmt.Errorf("both a token file (%q) and a token variable (%q) are set: give one", file, env)
	}
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("token file: %w: give a readable file holding the token", err)
		}
		tok := strings.TrimSpace(string(b))
		if tok == "" {
			return "", fmt.Errorf("token file %q is empty: write a token into it (for instance: head -c 32 /dev/urandom | base64 > %s)", file, file)
		}
		return tok, validToken(tok)
	}
	if env == "" {
		return "", nil
	}
	tok, ok := os.LookupEnv(env)
	tok = strings.TrimSpace(tok)
	if !ok || tok == "" {
		return "", fmt.Errorf("token variable %s is unset or empty: export %s=TOKEN, or give no token variable", env, env)
	}
	return tok, validToken(tok)
}

// validToken refuses tokens that cannot travel in an Authorization header.
func validToken(tok string) error {
	if strings.ContainsFunc(tok, func(r rune) bool { return r <= ' ' || r >= 0x7f }) {
		return errors.New("the token holds spaces or control or non-ASCII characters: use printable ASCII only (base64 is fine)")
	}
	return nil
}
