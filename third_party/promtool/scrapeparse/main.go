// Command scrapeparse parses a /metrics body the way Prometheus's scrape loop does
// (github.com/prometheus/prometheus model/textparse.New with the response's Content-Type and no
// fallback, scrape/scrape.go), so a body labelled with the wrong type fails as it would in a
// real scrape. It reads the body on stdin, takes the Content-Type as its only argument, and
// prints one line per metadata entry and sample:
//
//	TYPE <family> <counter|gauge|histogram|…>
//	SAMPLE <name> <value> <labels without __name__, as {a="b"}>
//
// Exit code 1 with the parser's error on stderr when the body does not parse.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: scrapeparse CONTENT-TYPE < body")
		os.Exit(2)
	}
	body, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "reading stdin:", err)
		os.Exit(2)
	}
	p, err := textparse.New(body, os.Args[1], labels.NewSymbolTable(), textparse.ParserOptions{})
	if p == nil {
		fmt.Fprintf(os.Stderr, "no parser for Content-Type %q: %v\n", os.Args[1], err)
		os.Exit(1)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "Content-Type %q: %v\n", os.Args[1], err)
		os.Exit(1)
	}
	for {
		entry, err := p.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "parse error:", err)
			os.Exit(1)
		}
		switch entry {
		case textparse.EntryType:
			name, typ := p.Type()
			fmt.Printf("TYPE %s %s\n", name, typ)
		case textparse.EntrySeries:
			_, _, value := p.Series()
			var l labels.Labels
			p.Labels(&l)
			name := l.Get(labels.MetricName)
			fmt.Printf("SAMPLE %s %v %s\n", name, value, l.DropMetricName().String())
		case textparse.EntryHistogram:
			fmt.Fprintln(os.Stderr, "unexpected native histogram")
			os.Exit(1)
		}
	}
}
