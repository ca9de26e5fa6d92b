package trace

import (
	"errors"
	"fmt"

	"github.com/rlhost/rlhost/sdk/internal/configdecode"
)

// DecodeConfig decodes a backend's config section (Run.Config, in Init) into dst, a pointer to
// the backend's own config struct holding its defaults, by the rules of task.DecodeConfig
// (fields tagged `config:"name"`; a key left out keeps its default). An unknown key or a value
// of the wrong type is one error wrapping ErrInvalidArgument that names the backend and the
// key; ranges and formats are the backend's to check after.
func DecodeConfig(backend string, config map[string]any, dst any) error {
	err := configdecode.Decode(backend, config, dst)
	var e *configdecode.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &e):
		return fmt.Errorf("%s: %w", e.Msg, ErrInvalidArgument)
	}
	return fmt.Errorf("trace.DecodeConfig: %w", err)
}
