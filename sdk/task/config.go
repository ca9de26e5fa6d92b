package task

import (
	"errors"
	"fmt"

	"github.com/rlhost/rlhost/sdk/internal/configdecode"
)

// DecodeConfig decodes the config a Configure call received into dst, a pointer to the
// plugin's own config struct holding its defaults: a key the config leaves out keeps its
// field's value, and an empty config changes nothing.
//
// The keys are the struct's fields tagged `config:"name"`, in field order; untagged fields are
// not keys. A field tagged `config:",inline"` is a struct whose own keys sit at this level.
// A field takes, by its type:
//
//   - string (or a type of kind string): a JSON string
//   - bool: true or false
//   - an integer type: an integer (a number without a fraction, in range)
//   - a float type: a number
//   - time.Duration: a number of seconds
//   - a slice: a list, each element by the element type
//   - map[string]T: an object, each value by T
//   - a struct with tagged fields: an object with those keys (nested keys "a.b")
//   - a pointer: null (nil) or what the pointed-to type takes
//   - any: any JSON value, as Configure received it
//
// An unknown key or a value of the wrong type is one InvalidArgument error naming the plugin
// and the key, for instance
//
//	gsm8k config key "format_score": want a number, got "high"
//	gsm8k config: unknown key "tool_bonsu" (known: score_method, ..., tool_bonus); did you mean "tool_bonus"?
//
// A `want:"..."` tag replaces what the wrong-type error says the key wants ("a positive
// integer", "an http(s) URL"); a `secret:"true"` tag keeps the value out of the error (it
// says only "got a number"). Keys are decoded in sorted order and the first error is
// returned; dst may then be partly set. Ranges and formats beyond the type (a positive
// count, a URL's scheme) are the plugin's to check after DecodeConfig.
func DecodeConfig(plugin string, config map[string]any, dst any) error {
	err := configdecode.Decode(plugin, config, dst)
	var e *configdecode.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &e):
		return InvalidArgument("%s", e.Msg)
	}
	return fmt.Errorf("task.DecodeConfig: %w", err)
}
