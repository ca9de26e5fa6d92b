package conformance

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
)

// ValidToolName is what OpenAI-style function names allow.
var ValidToolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

var schemaTypes = map[string]bool{"object": true, "array": true, "string": true, "number": true,
	"integer": true, "boolean": true, "null": true}

// CheckToolParameters checks that a tool's parameters are a valid JSON Schema for an arguments
// object: JSON; type "object"; properties an object of valid schemas; required a list of
// declared property names. Nested schemas are checked for known types, well-formed items,
// enum arrays and properties.
func CheckToolParameters(raw json.RawMessage) error {
	if len(raw) == 0 {
		return fmt.Errorf("parameters are empty: want a JSON Schema object such as {\"type\":\"object\",\"properties\":{}}")
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return fmt.Errorf("parameters are not valid JSON: %w", err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("parameters must be a JSON object (a schema)")
	}
	if m["type"] != "object" {
		return fmt.Errorf("parameters must have \"type\": \"object\", got %v", m["type"])
	}
	return checkSchema("parameters", m)
}

func checkSchema(path string, m map[string]any) error {
	if t, ok := m["type"]; ok {
		switch tt := t.(type) {
		case string:
			if !schemaTypes[tt] {
				return fmt.Errorf("%s.type: %q is not a JSON Schema type", path, tt)
			}
		case []any:
			for _, e := range tt {
				s, ok := e.(string)
				if !ok || !schemaTypes[s] {
					return fmt.Errorf("%s.type: %v is not a JSON Schema type", path, e)
				}
			}
		default:
			return fmt.Errorf("%s.type must be a string or a list of strings", path)
		}
	}
	if p, ok := m["properties"]; ok {
		props, ok := p.(map[string]any)
		if !ok {
			return fmt.Errorf("%s.properties must be an object", path)
		}
		names := make([]string, 0, len(props))
		for k := range props {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			sub, ok := props[k].(map[string]any)
			if !ok {
				return fmt.Errorf("%s.properties.%s must be a schema object", path, k)
			}
			if err := checkSchema(path+".properties."+k, sub); err != nil {
				return err
			}
		}
	}
	if r, ok := m["required"]; ok {
		req, ok := r.([]any)
		if !ok {
			return fmt.Errorf("%s.required must be a list of property names", path)
		}
		props, _ := m["properties"].(map[string]any)
		for _, e := range req {
			s, ok := e.(string)
			if !ok {
				return fmt.Errorf("%s.required: %v is not a string", path, e)
			}
			if _, ok := props[s]; !ok {
				return fmt.Errorf("%s.required names %q, which is not in properties", path, s)
			}
		}
	}
	if it, ok := m["items"]; ok {
		sub, ok := it.(map[string]any)
		if !ok {
			return fmt.Errorf("%s.items must be a schema object", path)
		}
		if err := checkSchema(path+".items", sub); err != nil {
			return err
		}
	}
	if e, ok := m["enum"]; ok {
		if arr, ok := e.([]any); !ok || len(arr) == 0 {
			return fmt.Errorf("%s.enum must be a non-empty list", path)
		}
	}
	if d, ok := m["description"]; ok {
		if _, ok := d.(string); !ok {
			return fmt.Errorf("%s.description must be a string", path)
		}
	}
	return nil
}
