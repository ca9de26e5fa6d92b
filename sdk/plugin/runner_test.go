package plugin_test

import (
	"testing"

	"github.com/rlhost/rlhost/sdk/plugin"
)

func TestNormalizeHandshake(t *testing.T) {
	for in, want := range map[string]string{
		"1|1|unix|/tmp/p|grpc|QUJDRA==\n": "1|1|unix|/tmp/p|grpc|QUJDRA\n",
		"1|1|unix|/tmp/p|grpc|QUJDRA=\n":  "1|1|unix|/tmp/p|grpc|QUJDRA\n",
		"1|1|unix|/tmp/p|grpc|QUJD\n":     "1|1|unix|/tmp/p|grpc|QUJD\n",
		"1|1|unix|/tmp/p|grpc\n":          "1|1|unix|/tmp/p|grpc\n",
		"1|1|unix|/tmp/p|grpc|QUI=|true":  "1|1|unix|/tmp/p|grpc|QUI|true",
		"hello, I am not a plugin\n":      "hello, I am not a plugin\n",
	} {
		if got := plugin.NormalizeHandshake(in); got != want {
			t.Errorf("NormalizeHandshake(%q) = %q, want %q", in, got, want)
		}
	}
}
