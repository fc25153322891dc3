package room

import (
	"flag"
	"reflect"
	"testing"
)

// A setting has one default: what the flags give unset is what a Config
// built in code gets for a field left zero.
func TestFlagDefaultsAreTheConfigDefaults(t *testing.T) {
	var flagged Config // registering a flag sets its default
	flagged.Flags(flag.NewFlagSet("serve", flag.PanicOnError))
	var built Config
	built.withDefaults()
	// The address, the credentials and the booleans have no default in
	// code: an empty address or credential means none, and false is off.
	flagged.HTTPAddr = ""
	if !reflect.DeepEqual(flagged, built) {
		t.Fatalf("flags give %+v\nwithDefaults gives %+v", flagged, built)
	}
}
