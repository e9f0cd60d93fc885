package store

import (
	"fmt"
	"strings"
)

// Part is one named query of a statement's WITH clause and its arguments,
// in the order of its ? placeholders. A statement composed of parts (With)
// carries each part's arguments with its text, so no caller counts
// positions by hand, and a part whose placeholders and arguments disagree
// is refused when the statement is built, on either engine, rather than
// failing where it runs.
type Part struct {
	Name string
	SQL  string
	Args []any
}

// NewPart is a Part; it panics when sql's placeholders and args differ in
// number (a statement's shape is fixed by the code that writes it, so this
// is a programming error that any test building the part finds).
func NewPart(name, sql string, args ...any) Part {
	p := Part{Name: name, SQL: sql, Args: args}
	p.check()
	return p
}

func (p Part) check() {
	if n := strings.Count(p.SQL, "?"); n != len(p.Args) {
		panic(fmt.Sprintf("store: part %q has %d placeholders and %d arguments", p.Name, n, len(p.Args)))
	}
}

// Query is a statement's text, with bun's ? placeholders, and its
// arguments in order: what ScanBound runs.
type Query struct {
	SQL  string
	Args []any
}

// With renders parts as a WITH clause, "WITH a AS (…), b AS (…)", each
// part's arguments following the previous part's. The statement goes on
// with Then. It panics as NewPart does for a part built by hand.
func With(parts ...Part) Query {
	var b strings.Builder
	var args []any
	for i, p := range parts {
		p.check()
		if i == 0 {
			b.WriteString("WITH ")
		} else {
			b.WriteString(", ")
		}
		b.WriteString(p.Name)
		b.WriteString(" AS (")
		b.WriteString(p.SQL)
		b.WriteString(")")
		args = append(args, p.Args...)
	}
	return Query{SQL: b.String(), Args: args}
}

// Then appends the statement's main query (after the WITH clause) and its
// arguments.
func (q Query) Then(sql string, args ...any) Query {
	Part{Name: "main query", SQL: sql, Args: args}.check()
	return Query{SQL: q.SQL + " " + sql, Args: append(q.Args[:len(q.Args):len(q.Args)], args...)}
}
