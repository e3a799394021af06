package ep

import (
	"reflect"
	"testing"
)

// New compares every field of Config across PEs: a field added to Config must be added to
// configFields too.
func TestConfigFieldsCompared(t *testing.T) {
	ct := reflect.TypeOf(Config{})
	if ct.NumField() != len(configFields) {
		t.Fatalf("Config has %d fields, New compares %d", ct.NumField(), len(configFields))
	}
	for i, f := range configFields {
		if ct.Field(i).Name != f.name {
			t.Errorf("field %d of Config is %s, New compares %s there", i, ct.Field(i).Name, f.name)
		}
	}
}
