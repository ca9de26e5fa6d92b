package tokenizer

import (
	"strings"

	"github.com/nikolalohinski/gonja/v2/tokens"
)

// rewriteTemplate rewrites two jinja2 constructs that gonja does not evaluate as jinja2 does
// into equivalent ones it does, before the template is parsed:
//
//   - a conditional expression "A if C else B" inside brackets (a parenthesised term, a call
//     argument, a list item, a dict value), which gonja's parser only accepts as the whole of
//     an output or a set: it becomes "((C) and [A] or [B])[0]", which gonja evaluates lazily
//     as jinja2 does (and/or return an operand and short-circuit), e.g. Gemma's
//     "(first_user_prefix if loop.first else "")";
//   - a negative constant index x[-N], which gonja's getitem refuses when x has exactly N
//     items (x[-1] of a one-item list is None): it becomes x[-N:][0] (a slice, which gonja
//     computes as Python does), e.g. Mistral's "user_messages[-1]".
//
// The rewrite works on gonja's own tokens, so strings and comments are never touched. Text
// that does not lex is returned as it is (the parser then reports the error).
func rewriteTemplate(src string) string {
	for n := 0; n < 10000; n++ {
		out, changed := rewriteOnce(src)
		if !changed {
			return out
		}
		src = out
	}
	return src
}

func lexAll(src string) ([]*tokens.Token, bool) {
	l := tokens.NewLexer(src, templateConfig())
	go l.Run()
	var toks []*tokens.Token
	ok := true
	for tok := range l.Tokens {
		if tok.Type == tokens.Error {
			ok = false
		}
		toks = append(toks, tok)
	}
	return toks, ok
}

// endsTerm tells whether a token can end a term that a bracket then subscripts or calls.
func endsTerm(t *tokens.Token) bool {
	switch t.Type {
	case tokens.Name, tokens.String, tokens.RightParenthesis, tokens.RightBracket, tokens.RightBrace:
		return t.Val != "if" && t.Val != "else" && t.Val != "and" && t.Val != "or" && t.Val != "not" && t.Val != "in" && t.Val != "is"
	}
	return false
}

// rewriteOnce makes the first rewrite (innermost bracket group first) and reports whether it
// made one.
func rewriteOnce(src string) (string, bool) {
	toks, ok := lexAll(src)
	if !ok {
		return src, false
	}
	type open struct{ i int }
	var stack []open
	inExpr := false
	for i, t := range toks {
		switch t.Type {
		case tokens.VariableBegin, tokens.BlockBegin:
			inExpr, stack = true, stack[:0]
			continue
		case tokens.VariableEnd, tokens.BlockEnd:
			inExpr = false
			continue
		}
		if !inExpr {
			continue
		}
		switch t.Type {
		case tokens.LeftParenthesis, tokens.LeftBracket, tokens.LeftBrace:
			// x[-N] with a constant N
			if t.Type == tokens.LeftBracket && i > 0 && endsTerm(toks[i-1]) && i+3 < len(toks) &&
				toks[i+1].Type == tokens.Subtraction && toks[i+2].Type == tokens.Integer && toks[i+3].Type == tokens.RightBracket {
				end := toks[i+3].Pos + len(toks[i+3].Val)
				return src[:t.Pos] + "[-" + toks[i+2].Val + ":][0]" + src[end:], true
			}
			stack = append(stack, open{i})
		case tokens.RightParenthesis, tokens.RightBracket, tokens.RightBrace:
			if len(stack) == 0 {
				return src, false
			}
			o := stack[len(stack)-1].i
			stack = stack[:len(stack)-1]
			if out, ok := rewriteGroup(src, toks, o, i); ok {
				return out, true
			}
		}
	}
	return src, false
}

// rewriteGroup rewrites the first element of the bracket group toks[o+1:c] that is a
// conditional expression with an else.
func rewriteGroup(src string, toks []*tokens.Token, o, c int) (string, bool) {
	isDict := toks[o].Type == tokens.LeftBrace
	start, depth := o+1, 0
	for i := o + 1; i <= c; i++ {
		t := toks[i]
		switch t.Type {
		case tokens.LeftParenthesis, tokens.LeftBracket, tokens.LeftBrace:
			depth++
			continue
		case tokens.RightParenthesis, tokens.RightBracket, tokens.RightBrace:
			if i < c {
				depth--
				continue
			}
		case tokens.Comma:
			if depth > 0 {
				continue
			}
		default:
			continue
		}
		// toks[start:i] is one element
		elem := start
		if isDict {
			for k, d := start, 0; k < i; k++ {
				switch toks[k].Type {
				case tokens.LeftParenthesis, tokens.LeftBracket, tokens.LeftBrace:
					d++
				case tokens.RightParenthesis, tokens.RightBracket, tokens.RightBrace:
					d--
				case tokens.Colon:
					if d == 0 && elem == start {
						elem = k + 1
					}
				}
			}
		}
		if out, ok := rewriteConditional(src, toks, elem, i); ok {
			return out, true
		}
		start = i + 1
	}
	return src, false
}

// rewriteConditional rewrites toks[s:e] when it is "A if C else B" at its own top level.
func rewriteConditional(src string, toks []*tokens.Token, s, e int) (string, bool) {
	ifAt, elseAt, depth := -1, -1, 0
	for k := s; k < e; k++ {
		switch toks[k].Type {
		case tokens.LeftParenthesis, tokens.LeftBracket, tokens.LeftBrace:
			depth++
		case tokens.RightParenthesis, tokens.RightBracket, tokens.RightBrace:
			depth--
		case tokens.Name:
			if depth != 0 {
				continue
			}
			if toks[k].Val == "if" && ifAt < 0 {
				ifAt = k
			} else if toks[k].Val == "else" && ifAt >= 0 && elseAt < 0 {
				elseAt = k
			}
		}
	}
	if ifAt <= s || elseAt < 0 || elseAt+1 >= e {
		return src, false
	}
	text := func(a, b int) string { return strings.TrimSpace(src[toks[a].Pos:toks[b].Pos]) }
	a, cond, b := text(s, ifAt), text(ifAt+1, elseAt), text(elseAt+1, e)
	repl := "((" + cond + ") and [" + a + "] or [" + b + "])[0]"
	return src[:toks[s].Pos] + repl + src[toks[e].Pos:], true
}
