package main

// The lock-harness client protocol (docs/clients.md), for Go programs: JSON lines, one hello,
// then one request at a time on stdin, one answer each on stdout; logs go to stderr. stdin's
// end means the harness is done with us: exit at once.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
)

type node struct {
	Name string `json:"name"`
	Host string `json:"host"`
	Port int    `json:"port"`
}

type hello struct {
	Process   int     `json:"process"`
	Lock      string  `json:"lock"`
	TTL       float64 `json:"ttl"`
	OpTimeout float64 `json:"op_timeout"`
	Nodes     []node  `json:"nodes"`
}

type request struct {
	ID      int64   `json:"id"`
	Op      string  `json:"op"`
	Timeout float64 `json:"timeout"`
	Handle  int64   `json:"handle"`
}

// reply is one answer; nil fields are left out.
type reply map[string]interface{}

func ok(fields reply) reply {
	fields["type"] = "ok"
	return fields
}

func fail(err string) reply { return reply{"type": "fail", "error": err} }
func info(err string) reply { return reply{"type": "info", "error": err} }

func logf(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "[go-etcd-mutex %d] "+format+"\n", append([]interface{}{os.Getpid()}, args...)...)
}

// lockClient answers the requests after the hello.
type lockClient interface {
	describe() reply
	handle(req request) reply
}

func serve(start func(h hello) (lockClient, error)) {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<16), 1<<20)
	out := json.NewEncoder(os.Stdout) // one Encode = one line
	if !in.Scan() {
		os.Exit(0)
	}
	var h hello
	if err := json.Unmarshal(in.Bytes(), &h); err != nil {
		out.Encode(fail("hello is not JSON: " + err.Error()))
		os.Exit(1)
	}
	client, err := start(h)
	if err != nil {
		out.Encode(fail(err.Error()))
		os.Exit(1)
	}
	out.Encode(ok(client.describe()))
	for in.Scan() {
		var req request
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			logf("not JSON, ignored: %.100s", in.Text())
			continue
		}
		answer := client.handle(req)
		answer["id"] = req.ID
		out.Encode(answer)
	}
	os.Exit(0)
}
