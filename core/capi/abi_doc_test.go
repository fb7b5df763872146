package main

import (
	"fmt"
	"maps"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"encmatch/core/base/params"
	"encmatch/core/face/index"
)

// docShapes are the replies docs/ABI.md names instead of spelling out:
// a "result JSON" cell that starts with one of these names is that type's
// fields (the reply must embed it) plus the cell's extra keys, and the
// doc's definition of the shape, the first object after its anchor, must
// list exactly the type's fields.
var docShapes = map[string]struct {
	typ    reflect.Type
	anchor string
}{
	"manifest":              {reflect.TypeFor[index.Manifest](), "The manifest ("},
	"parameter description": {reflect.TypeFor[params.Description](), "`describe` returns"},
}

// docPlusKey matches an extra key after "plus" in a cell: a code span that
// starts with a quoted name, as in plus `"signed": {...}` (keys within the
// span, nested, are not matched).
var docPlusKey = regexp.MustCompile("`\"([a-z0-9_]+)\"")

// docMethodName matches a method's cell: its backticked name.
var docMethodName = regexp.MustCompile("^`([a-z0-9_]+)`$")

// docRow is a method's row in a table of docs/ABI.md.
type docRow struct {
	line   int
	result string // the "result JSON" cell
}

// TestABIDocListsEveryReplyField checks docs/ABI.md against the method
// table: every method is documented once and every documented method
// exists, and each row's "result JSON" names exactly the top-level fields
// of the method's reply type. A cell is read in one of two forms, anything
// else failing the test:
//   - an object, `{"key", "key": nested, ...}`: its top-level keys (those
//     within nested {...} or [...] are not the reply's);
//   - a named shape (docShapes: "manifest", "parameter description"), which
//     the reply type must embed.
//
// Either may go on with prose; after the word "plus" every code span that
// starts with a quoted name adds that key (plus `"signed": {...}` when
// signed). The named shapes' own definitions in the doc are checked too.
func TestABIDocListsEveryReplyField(t *testing.T) {
	raw, err := os.ReadFile("../../docs/ABI.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	rows := docMethodRows(t, doc)
	for name := range methods {
		if _, ok := rows[name]; !ok {
			t.Errorf("method %q is not documented in docs/ABI.md", name)
		}
	}
	for name, row := range rows {
		m, ok := methods[name]
		if !ok {
			t.Errorf("docs/ABI.md:%d documents %q, which is not a method", row.line, name)
			continue
		}
		want, err := docReplyKeys(row.result, m.reply)
		if err != nil {
			t.Errorf("docs/ABI.md:%d: %s: %v", row.line, name, err)
			continue
		}
		if missing, extra := setDiff(jsonFields(m.reply), want); len(missing)+len(extra) > 0 {
			t.Errorf("docs/ABI.md:%d: %s (%v): undocumented fields %v, documented fields the reply does not have %v",
				row.line, name, m.reply, missing, extra)
		}
	}
	for name, shape := range docShapes {
		at := strings.Index(doc, shape.anchor)
		brace := strings.IndexByte(doc[max(at, 0):], '{')
		if at < 0 || brace < 0 {
			t.Errorf("docs/ABI.md does not define the %s (no object after %q)", name, shape.anchor)
			continue
		}
		keys, _, err := topKeys(doc[at+brace:])
		if err != nil {
			t.Errorf("docs/ABI.md, the %s: %v", name, err)
			continue
		}
		if missing, extra := setDiff(jsonFields(shape.typ), keys); len(missing)+len(extra) > 0 {
			t.Errorf("docs/ABI.md, the %s (%v): undocumented fields %v, documented fields it does not have %v", name, shape.typ, missing, extra)
		}
	}
}

// docMethodRows returns the rows of doc's method tables (those with a
// "result JSON" column) by method name, refusing a method documented twice.
func docMethodRows(t *testing.T, doc string) map[string]docRow {
	rows := map[string]docRow{}
	lines := strings.Split(doc, "\n")
	result := -1 // the current table's "result JSON" column
	for i, line := range lines {
		if !strings.HasPrefix(line, "|") {
			result = -1
			continue
		}
		cells := tableCells(line)
		if i+1 < len(lines) && strings.HasPrefix(lines[i+1], "| ---") { // a header
			result = slices.Index(cells, "result JSON")
			continue
		}
		name := docMethodName.FindStringSubmatch(cells[0])
		if result < 0 || name == nil || result >= len(cells) {
			continue
		}
		if prev, ok := rows[name[1]]; ok {
			t.Errorf("docs/ABI.md:%d documents %q again (first at line %d)", i+1, name[1], prev.line)
		}
		rows[name[1]] = docRow{line: i + 1, result: cells[result]}
	}
	if len(rows) == 0 {
		t.Fatal("docs/ABI.md has no method table")
	}
	return rows
}

// tableCells splits a Markdown table row at its unescaped pipes, trimmed.
func tableCells(line string) []string {
	var cells []string
	var cell strings.Builder
	for i := 1; i < len(line); i++ { // line[0] is the row's opening pipe
		switch {
		case line[i] == '\\' && i+1 < len(line) && line[i+1] == '|':
			cell.WriteByte('|')
			i++
		case line[i] == '|':
			cells = append(cells, strings.TrimSpace(cell.String()))
			cell.Reset()
		default:
			cell.WriteByte(line[i])
		}
	}
	return cells
}

// docReplyKeys returns the top-level keys a "result JSON" cell documents
// for a reply of type reply.
func docReplyKeys(cell string, reply reflect.Type) ([]string, error) {
	s := strings.TrimPrefix(strings.TrimSpace(cell), "`")
	var keys []string
	rest := ""
	if strings.HasPrefix(s, "{") {
		k, end, err := topKeys(s)
		if err != nil {
			return nil, err
		}
		keys, rest = k, s[end:]
	} else {
		for name, shape := range docShapes {
			if strings.HasPrefix(s, name) {
				if !embeds(reply, shape.typ) {
					return nil, fmt.Errorf("documented as the %s, but %v does not embed %v", name, reply, shape.typ)
				}
				keys, rest = jsonFields(shape.typ), s[len(name):]
			}
		}
		if keys == nil {
			return nil, fmt.Errorf("cannot read the result %q: neither an object nor a named shape %v", cell, slices.Sorted(maps.Keys(docShapes)))
		}
	}
	if at := strings.Index(rest, "plus"); at >= 0 {
		for _, m := range docPlusKey.FindAllStringSubmatch(rest[at:], -1) {
			keys = append(keys, m[1])
		}
	}
	return keys, nil
}

// topKeys returns the keys of the object that s starts with, not those of
// the objects and arrays nested in it, and the object's end in s. A key is
// a quoted name not preceded by a colon (a quoted value).
func topKeys(s string) (keys []string, end int, err error) {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '{', '[':
			depth++
		case '}', ']':
			if depth--; depth == 0 {
				return keys, i + 1, nil
			}
		case '"':
			j := strings.IndexByte(s[i+1:], '"')
			if j < 0 {
				return nil, 0, fmt.Errorf("unterminated quote in %q", s)
			}
			if depth == 1 && !strings.HasSuffix(strings.TrimSpace(s[:i]), ":") {
				keys = append(keys, s[i+1:i+1+j])
			}
			i += j + 1
		}
	}
	return nil, 0, fmt.Errorf("unbalanced braces in %q", s)
}

// jsonFields returns the names of the fields encoding/json writes for a
// struct of type t (or a pointer to one): exported fields by their tag's
// name or their own, embedded structs without a tag name flattened, fields
// tagged "-" skipped.
func jsonFields(t reflect.Type) []string {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var names []string
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch {
		case f.Anonymous && name == "" && ft.Kind() == reflect.Struct:
			names = append(names, jsonFields(ft)...)
		case !f.IsExported():
		case name == "":
			names = append(names, f.Name)
		default:
			names = append(names, name)
		}
	}
	return names
}

// embeds reports whether struct type t (or a pointer to one) embeds shape,
// by value or by pointer, at any depth.
func embeds(t, shape reflect.Type) bool {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return false
	}
	for f := range t.Fields() {
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && (ft == shape || embeds(ft, shape)) {
			return true
		}
	}
	return false
}

// setDiff returns the names in have and not in want, and those in want
// and not in have.
func setDiff(have, want []string) (missing, extra []string) {
	for _, h := range have {
		if !slices.Contains(want, h) {
			missing = append(missing, h)
		}
	}
	for _, w := range want {
		if !slices.Contains(have, w) {
			extra = append(extra, w)
		}
	}
	return missing, extra
}
