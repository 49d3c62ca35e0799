package events

import (
	"fmt"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/interpreter"
)

// FilterCostLimit bounds the work one evaluation of a filter may do, in
// CEL's cost units (about one per operation or byte compared). A filter
// that reaches it fails for that event (counted as a filter error).
const FilterCostLimit = 10000

// MaxFilterLen bounds a filter's text.
const MaxFilterLen = 4096

// ExprError is an expression that does not compile: where and why.
type ExprError struct {
	Expr   string
	Line   int // 1-based, within the expression
	Column int // 1-based
	Reason string
}

func (e *ExprError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("expression %q: line %d column %d: %s", e.Expr, e.Line, e.Column, e.Reason)
	}
	return fmt.Sprintf("expression %q: %s", e.Expr, e.Reason)
}

// Filter is a compiled CEL predicate over an event. The expression sees
// topic (string), source (string), time and deadline (timestamps; a
// deadline that is not set is the zero time), seq (uint) and payload
// (map from string to any value), and must return a bool: e.g.
//
//	topic.startsWith("lane.") && payload.cpu_usage > 0.9
//	has(payload.fps) && payload.fps < payload.fps_min
type Filter struct {
	expr string
	prg  cel.Program
}

var (
	envOnce sync.Once
	envErr  error
	env     *cel.Env
)

// Env returns the CEL environment of event expressions (filters and the
// controllers' handlers declare the same variables).
func Env() (*cel.Env, error) {
	envOnce.Do(func() {
		env, envErr = cel.NewEnv(
			cel.Variable("topic", cel.StringType),
			cel.Variable("source", cel.StringType),
			cel.Variable("time", cel.TimestampType),
			cel.Variable("deadline", cel.TimestampType),
			cel.Variable("seq", cel.UintType),
			cel.Variable("payload", cel.MapType(cel.StringType, cel.DynType)),
			cel.CrossTypeNumericComparisons(true),
		)
	})
	return env, envErr
}

// Compile type-checks a CEL expression in the events' environment (plus
// opts) and returns its AST, refusing one whose result is not of type
// want (nil: any). Errors are *ExprError.
func Compile(expr string, want *cel.Type, opts ...cel.EnvOption) (*cel.Ast, *cel.Env, error) {
	if strings.TrimSpace(expr) == "" {
		return nil, nil, &ExprError{Expr: expr, Reason: "empty expression"}
	}
	if len(expr) > MaxFilterLen {
		return nil, nil, &ExprError{Expr: expr[:40] + "...", Reason: fmt.Sprintf("%d bytes, more than %d", len(expr), MaxFilterLen)}
	}
	e, err := Env()
	if err != nil {
		return nil, nil, fmt.Errorf("cel environment: %w", err)
	}
	if len(opts) > 0 {
		if e, err = e.Extend(opts...); err != nil {
			return nil, nil, fmt.Errorf("cel environment: %w", err)
		}
	}
	ast, iss := e.Compile(expr)
	if iss != nil && iss.Err() != nil {
		xe := &ExprError{Expr: expr, Reason: iss.Err().Error()}
		if errs := iss.Errors(); len(errs) > 0 {
			first := errs[0]
			xe.Reason = first.Message
			if loc := first.Location; loc != nil && loc.Line() > 0 {
				xe.Line, xe.Column = loc.Line(), loc.Column()+1
			}
		}
		return nil, nil, xe
	}
	if want != nil && !ast.OutputType().IsExactType(want) && !ast.OutputType().IsExactType(cel.DynType) {
		return nil, nil, &ExprError{Expr: expr, Reason: fmt.Sprintf("the expression is of type %s, want %s", ast.OutputType(), want)}
	}
	return ast, e, nil
}

// Program makes a runnable program of a checked AST, with the cost limit.
func Program(e *cel.Env, ast *cel.Ast) (cel.Program, error) {
	prg, err := e.Program(ast, cel.CostLimit(FilterCostLimit), cel.EvalOptions(cel.OptOptimize))
	if err != nil {
		return nil, fmt.Errorf("cel program: %w", err)
	}
	return prg, nil
}

// CompileFilter compiles a filter expression. Errors are *ExprError.
func CompileFilter(expr string) (*Filter, error) {
	ast, e, err := Compile(expr, cel.BoolType)
	if err != nil {
		return nil, err
	}
	prg, err := Program(e, ast)
	if err != nil {
		return nil, err
	}
	return &Filter{expr: expr, prg: prg}, nil
}

// String is the filter's expression.
func (f *Filter) String() string { return f.expr }

// Match evaluates the filter on e. An evaluation error (a payload key that
// is not there, the cost limit) is returned with false.
func (f *Filter) Match(e *Event) (bool, error) {
	out, _, err := f.prg.Eval(Activation(e))
	if err != nil {
		return false, err
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, fmt.Errorf("filter %q returned %s, not a bool", f.expr, out.Type())
	}
	return bool(b), nil
}

// Activation binds an event's fields to the expressions' variables without
// copying the payload.
func Activation(e *Event) interpreter.Activation { return eventActivation{e} }

type eventActivation struct{ e *Event }

func (a eventActivation) ResolveName(name string) (any, bool) {
	switch name {
	case "topic":
		return a.e.Topic, true
	case "source":
		return a.e.Source, true
	case "time":
		return a.e.Time, true
	case "deadline":
		return a.e.Deadline, true
	case "seq":
		return a.e.Seq, true
	case "payload":
		if a.e.Payload == nil {
			return map[string]any{}, true
		}
		return a.e.Payload, true
	}
	return nil, false
}

func (a eventActivation) Parent() interpreter.Activation { return nil }
