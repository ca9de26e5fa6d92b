package tokenizer

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nikolalohinski/gonja/v2"
	"github.com/nikolalohinski/gonja/v2/builtins"
	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/loaders"
	"github.com/nikolalohinski/gonja/v2/parser"
	"github.com/nikolalohinski/gonja/v2/tokens"
)

// chatTemplate is a compiled chat template, rendered the way transformers'
// apply_chat_template renders it: jinja2 with trim_blocks and lstrip_blocks,
// no trailing-newline keeping, the globals raise_exception and strftime_now,
// and a tojson filter that is Python's json.dumps (ensure_ascii=False, key
// order kept).
type chatTemplate struct {
	tmpl *exec.Template
}

var gonjaQuiet sync.Once

// templateConfig mirrors transformers' ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True).
func templateConfig() *config.Config {
	c := config.New()
	c.TrimBlocks = true
	c.LeftStripBlocks = true
	c.KeepTrailingNewline = false
	return c
}

func templateEnvironment() *exec.Environment {
	filters := exec.NewFilterSet(maps.Clone(builtinsFilters()))
	filters.Replace("tojson", filterPyJSON)
	filters.Replace("items", filterItems)
	ctx := gonja.DefaultContext.Inherit()
	ctx.Set("raise_exception", raiseException)
	ctx.Set("strftime_now", strftimeNow)
	return &exec.Environment{
		Context:           ctx,
		Filters:           filters,
		Tests:             gonja.DefaultEnvironment.Tests,
		ControlStructures: gonja.DefaultEnvironment.ControlStructures,
		Methods:           templateMethods(),
	}
}

// templateMethods are gonja's methods with the dict methods keys(), values() and items() in
// the order of the dict's keys, as Python's dicts keep it (gonja sorts them): a JSON object of
// the messages or tools in the order it was written, a template's dict literal in its order.
func templateMethods() exec.Methods {
	m := gonja.DefaultEnvironment.Methods
	dict := map[string]exec.Method[map[string]any]{
		"keys": func(self map[string]any, v *exec.Value, args *exec.VarArgs) (any, error) {
			if err := args.Take(); err != nil {
				return nil, exec.ErrInvalidCall(err)
			}
			items := itemsOf(self, v)
			out := make([]any, len(items))
			for i, kv := range items {
				out[i] = kv.([]any)[0]
			}
			return out, nil
		},
		"values": func(self map[string]any, v *exec.Value, args *exec.VarArgs) (any, error) {
			if err := args.Take(); err != nil {
				return nil, exec.ErrInvalidCall(err)
			}
			items := itemsOf(self, v)
			out := make([]any, len(items))
			for i, kv := range items {
				out[i] = kv.([]any)[1]
			}
			return out, nil
		},
		"items": func(self map[string]any, v *exec.Value, args *exec.VarArgs) (any, error) {
			if err := args.Take(); err != nil {
				return nil, exec.ErrInvalidCall(err)
			}
			return itemsOf(self, v), nil
		},
	}
	for _, name := range []string{"get", "pop", "setdefault", "update", "copy", "clear"} {
		if f, ok := m.Dict.Get(name); ok {
			dict[name] = f
		}
	}
	m.Dict = exec.NewMethodSet(dict)
	return m
}

// itemsOf are the (key, value) pairs of the dict a method was called on, in its keys' order:
// gonja hands the method a copy of the dict (self), so the order is looked up on the original
// (v); a dict whose order is unknown is sorted, as gonja does.
func itemsOf(self map[string]any, v *exec.Value) []any {
	switch d := unwrap(v.Interface()).(type) {
	case map[string]any:
		return orderedItems(d)
	case orderedObject:
		out := make([]any, len(d.keys))
		for i, k := range d.keys {
			out[i] = []any{k, d.vals[k]}
		}
		return out
	}
	return orderedItems(self)
}

// orderedItems are a map's (key, value) pairs in its keys' order.
func orderedItems(d map[string]any) []any {
	keys := keysOf(d)
	out := make([]any, len(keys))
	for i, k := range keys {
		out[i] = []any{k, d[k]}
	}
	return out
}

// filterItems is jinja2's items filter (a mapping's pairs, in its order; a list as it is).
func filterItems(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if err := params.Take(); err != nil {
		return exec.AsValue(exec.ErrInvalidCall(err))
	}
	if in.IsNil() {
		return exec.AsValue([]any{})
	}
	if in.IsList() {
		return in
	}
	switch unwrap(in.Interface()).(type) {
	case map[string]any, orderedObject:
		return exec.AsValue(itemsOf(nil, in))
	}
	return exec.AsValue(errors.New("items requires a mapping"))
}

func builtinsFilters() map[string]exec.FilterFunction {
	out := map[string]exec.FilterFunction{}
	for name := range builtinFilterNames {
		if fn, ok := builtins.Filters.Get(name); ok {
			out[name] = fn
		}
	}
	return out
}

// builtinFilterNames are the jinja2 filters gonja provides that templates may use.
var builtinFilterNames = map[string]bool{
	"abs": true, "attr": true, "batch": true, "capitalize": true, "center": true, "default": true, "d": true,
	"dictsort": true, "e": true, "escape": true, "first": true, "float": true, "format": true, "groupby": true,
	"indent": true, "int": true, "join": true, "items": true, "last": true, "length": true, "count": true,
	"list": true, "lower": true, "map": true, "max": true, "min": true, "reject": true, "rejectattr": true,
	"replace": true, "reverse": true, "round": true, "safe": true, "select": true, "selectattr": true,
	"slice": true, "sort": true, "string": true, "striptags": true, "sum": true, "title": true, "tojson": true,
	"trim": true, "truncate": true, "unique": true, "upper": true, "wordcount": true, "wordwrap": true,
}

// compileTemplate parses a chat template; name is used in errors.
func compileTemplate(name, src string) (*chatTemplate, error) {
	gonjaQuiet.Do(func() { gonja.SetLoggerOutput(io.Discard) })
	root := "chat_template"
	loader, err := loaders.NewShiftedLoader(root, strings.NewReader(rewriteTemplate(src)), emptyLoader{})
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %s: chat template: %v", name, err)
	}
	var t *exec.Template
	err = catchPanic(func() error {
		var err error
		t, err = exec.NewTemplate(root, templateConfig(), loader, templateEnvironment())
		return err
	})
	if err != nil {
		msg := strings.ReplaceAll(err.Error(), "failed to parse template '"+src+"': ", "")
		if line := syntaxErrorLine(src, err); line > 0 {
			msg = fmt.Sprintf("line %d: %s", line, msg)
		}
		return nil, fmt.Errorf("tokenizer: %s: chat template does not parse: %s", name, msg)
	}
	return &chatTemplate{tmpl: t}, nil
}

// render executes the template with the given variables.
func (c *chatTemplate) render(name string, vars map[string]any) (string, error) {
	var out string
	err := catchPanic(func() error {
		var err error
		out, err = c.tmpl.ExecuteToString(exec.NewContext(vars))
		return err
	})
	if err != nil {
		var re *raisedError
		if errors.As(err, &re) {
			return "", fmt.Errorf("tokenizer: %s: chat template raised an exception: %s", name, re.msg)
		}
		if _, msg, ok := strings.Cut(err.Error(), raisePrefix); ok {
			// gonja flattens the error to text on the way out
			return "", fmt.Errorf("tokenizer: %s: chat template raised an exception: %s", name, msg)
		}
		return "", fmt.Errorf("tokenizer: %s: chat template failed to render: %s", name, templateErr(err))
	}
	return out, nil
}

func catchPanic(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("internal error in the template engine: %v", r)
		}
	}()
	return fn()
}

// syntaxErrorLine finds the template line of a parse error: gonja's parser
// reports it for parser errors, and its lexer's error tokens carry a byte offset.
func syntaxErrorLine(src string, err error) int {
	var se *parser.SyntaxError
	if errors.As(err, &se) && se.Line > 0 {
		return se.Line
	}
	l := tokens.NewLexer(src, templateConfig())
	go l.Run()
	line := 0
	for tok := range l.Tokens {
		if tok.Type == tokens.Error && line == 0 {
			line = strings.Count(src[:min(max(tok.Pos, 0), len(src))], "\n") + 1
		}
	}
	return line
}

var lineRE = regexp.MustCompile(`[Ll]ine[: ]+(\d+)`)

// templateErr shortens gonja's error chain and makes sure it names a line when gonja gives one.
func templateErr(err error) string {
	msg := err.Error()
	msg = strings.ReplaceAll(msg, "unable to execute template: ", "")
	if m := lineRE.FindStringSubmatch(msg); m != nil && !strings.HasPrefix(msg, "line ") {
		msg = "line " + m[1] + ": " + msg
	}
	return msg
}

// emptyLoader refuses include/import/extends: chat templates are self-contained.
type emptyLoader struct{}

func (emptyLoader) Read(path string) (io.Reader, error) {
	return nil, fmt.Errorf("chat templates cannot load %q", path)
}
func (emptyLoader) Resolve(path string) (string, error) {
	return "", fmt.Errorf("chat templates cannot load %q", path)
}
func (emptyLoader) Inherit(from string) (loaders.Loader, error) { return emptyLoader{}, nil }

type raisedError struct{ msg string }

const raisePrefix = "raise_exception: "

func (e *raisedError) Error() string { return raisePrefix + e.msg }

// raiseException is transformers' raise_exception(message) global.
func raiseException(_ *exec.Evaluator, params *exec.VarArgs) (string, error) {
	msg := ""
	if len(params.Args) > 0 {
		msg = params.Args[0].String()
	}
	return "", &raisedError{msg: msg}
}

// strftimeNow is transformers' strftime_now(format) global: the local time
// formatted with Python's strftime directives.
func strftimeNow(_ *exec.Evaluator, params *exec.VarArgs) (string, error) {
	if len(params.Args) != 1 || !params.Args[0].IsString() {
		return "", errors.New("strftime_now takes one format string")
	}
	return pyStrftime(nowFunc(), params.Args[0].String()), nil
}

var nowFunc = time.Now

func pyStrftime(t time.Time, f string) string {
	var b strings.Builder
	for i := 0; i < len(f); i++ {
		if f[i] != '%' || i+1 == len(f) {
			b.WriteByte(f[i])
			continue
		}
		i++
		switch f[i] {
		case 'Y':
			b.WriteString(strconv.Itoa(t.Year()))
		case 'y':
			fmt.Fprintf(&b, "%02d", t.Year()%100)
		case 'm':
			fmt.Fprintf(&b, "%02d", int(t.Month()))
		case 'd':
			fmt.Fprintf(&b, "%02d", t.Day())
		case 'e':
			fmt.Fprintf(&b, "%2d", t.Day())
		case 'B':
			b.WriteString(t.Month().String())
		case 'b', 'h':
			b.WriteString(t.Month().String()[:3])
		case 'A':
			b.WriteString(t.Weekday().String())
		case 'a':
			b.WriteString(t.Weekday().String()[:3])
		case 'H':
			fmt.Fprintf(&b, "%02d", t.Hour())
		case 'I':
			h := t.Hour() % 12
			if h == 0 {
				h = 12
			}
			fmt.Fprintf(&b, "%02d", h)
		case 'p':
			if t.Hour() < 12 {
				b.WriteString("AM")
			} else {
				b.WriteString("PM")
			}
		case 'M':
			fmt.Fprintf(&b, "%02d", t.Minute())
		case 'S':
			fmt.Fprintf(&b, "%02d", t.Second())
		case 'j':
			fmt.Fprintf(&b, "%03d", t.YearDay())
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(f[i])
		}
	}
	return b.String()
}

// filterPyJSON is transformers' tojson: json.dumps(x, ensure_ascii=False,
// indent=indent, separators=separators, sort_keys=sort_keys).
func filterPyJSON(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	opt := pyJSONOptions{itemSep: ", ", keySep: ": "}
	for k, v := range params.KwArgs {
		switch k {
		case "indent":
			if v.IsNil() {
				continue
			}
			if v.IsInteger() {
				opt.indent = strings.Repeat(" ", v.Integer())
			} else if v.IsString() {
				opt.indent = v.String()
			} else {
				return exec.AsValue(fmt.Errorf("tojson: indent must be an integer or a string"))
			}
			opt.indentOn = true
			opt.itemSep = ","
		case "separators":
			if !v.IsList() || v.Len() != 2 {
				return exec.AsValue(fmt.Errorf("tojson: separators must be a pair of strings"))
			}
			opt.itemSep = v.Index(0).String()
			opt.keySep = v.Index(1).String()
			opt.sepsGiven = true
		case "sort_keys":
			opt.sortKeys = v.IsTrue()
		case "ensure_ascii":
			opt.ensureASCII = v.IsTrue()
		default:
			return exec.AsValue(fmt.Errorf("tojson: unexpected keyword argument %q", k))
		}
	}
	if len(params.Args) > 0 {
		if params.Args[0].IsInteger() {
			opt.indent = strings.Repeat(" ", params.Args[0].Integer())
			opt.indentOn = true
			if !opt.sepsGiven {
				opt.itemSep = ","
			}
		}
	}
	var b strings.Builder
	if err := pyDump(&b, unwrap(in.Interface()), opt, 0); err != nil {
		return exec.AsValue(fmt.Errorf("tojson: %v", err))
	}
	return exec.AsSafeValue(b.String())
}

// unwrap turns gonja values back into plain Go values.
func unwrap(v any) any {
	switch x := v.(type) {
	case *exec.Value:
		return unwrap(x.Interface())
	case exec.Dict:
		return dictToOrdered(&x)
	case *exec.Dict:
		return dictToOrdered(x)
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Map && rv.Type().Key().Kind() == reflect.String {
		if m, ok := v.(map[string]any); ok {
			return m
		}
		m := map[string]any{}
		iter := rv.MapRange()
		for iter.Next() {
			m[iter.Key().String()] = iter.Value().Interface()
		}
		return m
	}
	return v
}

// orderedObject is a JSON object with its keys in a given order (dict
// literals in templates keep the order they are written in).
type orderedObject struct {
	keys []string
	vals map[string]any
}

func dictToOrdered(d *exec.Dict) orderedObject {
	o := orderedObject{vals: map[string]any{}}
	for _, p := range d.Pairs {
		k := p.Key.String()
		if _, ok := o.vals[k]; !ok {
			o.keys = append(o.keys, k)
		}
		o.vals[k] = p.Value.Interface()
	}
	return o
}
