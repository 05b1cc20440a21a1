package plugin

import (
	"encoding/binary"
	"testing"
)

// flat is linear memory as a fixed byte slice (it never moves, as the
// module's memory does not): address 0 stays unused (null), and
// allocations are bump-allocated at their alignment, as cabi_realloc would.
type flat struct {
	b    []byte
	next uint32
}

func newFlat() *flat { return &flat{b: make([]byte, 1<<16), next: 8} }

func (f *flat) view(addr, n uint32) []byte { return f.b[addr : addr+n] }

func (f *flat) alloc(size, align uint32) uint32 {
	at := (f.next + align - 1) / align * align
	f.next = at + size
	return at
}

func u32(m *flat, addr uint32) uint32 { return binary.LittleEndian.Uint32(m.b[addr:]) }

func str(m *flat, addr uint32) string { return liftString(m, u32(m, addr), u32(m, addr+4)) }

func TestStringsAndListsOfStringsLiftAsTheHostLowersThem(t *testing.T) {
	m := newFlat()
	list := newArea(m, 3*stringSize, 4)
	for i, s := range []string{"a", "", "ünïcode"} {
		list.at(uint32(i)*stringSize).string(0, s)
	}
	got := liftStrings(m, list.addr, 3)
	if len(got) != 3 || got[0] != "a" || got[1] != "" || got[2] != "ünïcode" {
		t.Fatalf("%q", got)
	}
	if liftOptionString(m, 0, 99, 99) != nil {
		t.Fatal("none lifts as nil whatever the payload")
	}
	if s := liftOptionString(m, 1, u32(m, list.addr), 1); s == nil || *s != "a" {
		t.Fatal("some lifts its string")
	}
}

// The layouts the Component Model gives the contract's types (the host's
// wasmtime lifts these bytes): a result's case @0 and payload @4, an
// action's case @0 and payload @8 (a u64 case aligns the variant to 8), a
// merge-patch's document after the four strings of its target.
func TestAPatchStepLowersToTheCanonicalLayout(t *testing.T) {
	m := newFlat()
	target := ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "default", Name: "c"}
	result := lowerSteps(m, []Step{
		{Act: Action{Kind: ActPatch, Target: target, Text: `{"x":1}`}},
		{Apply: `{"kind":"Job"}`},
		{Act: Action{Kind: ActRequeueAfter, Millis: 1 << 40}},
	}, nil)
	if m.b[result] != 0 {
		t.Fatal("ok case is 0")
	}
	items, n := u32(m, result+4), u32(m, result+8)
	if n != 3 || items%8 != 0 {
		t.Fatalf("list at %d (8-aligned) of %d", items, n)
	}
	patch := items
	if m.b[patch] != 0 || m.b[patch+8] != uint8(ActPatch) {
		t.Fatal("step 0 is act(patch)")
	}
	p := patch + 16
	if str(m, p) != "v1" || str(m, p+8) != "ConfigMap" || str(m, p+16) != "default" || str(m, p+24) != "c" || str(m, p+32) != `{"x":1}` {
		t.Fatal("merge-patch layout")
	}
	apply := items + stepSize
	if m.b[apply] != 1 || str(m, apply+8) != `{"kind":"Job"}` {
		t.Fatal("step 1 is apply")
	}
	requeue := items + 2*stepSize
	if m.b[requeue+8] != uint8(ActRequeueAfter) || binary.LittleEndian.Uint64(m.b[requeue+16:]) != 1<<40 {
		t.Fatal("requeue-after's u64 sits 8 bytes into the action")
	}
}

func TestAnErrorLowersAsTheResultsSecondCase(t *testing.T) {
	m := newFlat()
	result := lowerDefaulted(m, "", &ReconcileError{Reason: "R", Message: "m", Retryable: true})
	if m.b[result] != 1 || str(m, result+4) != "R" || str(m, result+12) != "m" || m.b[result+20] != 1 {
		t.Fatal("reconcile-error: reason @4, message @12, retryable @20")
	}
}

func TestApplyHasNoControllerReconcileForm(t *testing.T) {
	m := newFlat()
	result := lowerActions(m, []Step{{Apply: "{}"}}, nil)
	if m.b[result] != 1 || str(m, result+4) != "ApplyNeedsDesired" {
		t.Fatal("an apply step through controller.reconcile is an error naming desired.reconcile")
	}
}

func TestTheManifestLowersEveryField(t *testing.T) {
	m := newFlat()
	fin := "example.dev/cleanup"
	man := Manifest{
		Name: "n", Version: "1.0.0", Parent: GroupVersionKind{"g", "v1", "P"},
		Children: []GroupVersionKind{{"", "v1", "ConfigMap"}},
		Related: []RelatedKind{
			{Kind: GroupVersionKind{"", "v1", "Secret"}, Attach: Attachment{Kind: NamesFrom, Paths: []string{"spec.a", "spec.b"}}},
			{Kind: GroupVersionKind{"", "v1", "Node"}, Attach: Attachment{Kind: FixedSelector, Text: "{}"}, ClusterScoped: true},
		},
		CRDs: []string{"{}"}, Finalizer: &fin,
	}
	a := lowerManifest(m, &man)
	if str(m, a) != "n" || str(m, a+8) != "1.0.0" || str(m, a+16) != "g" || str(m, a+32) != "P" {
		t.Fatal("name, version, parent")
	}
	if u32(m, a+44) != 1 || str(m, u32(m, a+40)+16) != "ConfigMap" {
		t.Fatal("children")
	}
	related := u32(m, a+48)
	if u32(m, a+52) != 2 || m.b[related+24] != uint8(NamesFrom) || u32(m, related+32) != 2 || str(m, u32(m, related+28)+8) != "spec.b" {
		t.Fatal("names-from")
	}
	node := related + relatedKindSize
	if m.b[node+24] != uint8(FixedSelector) || str(m, node+28) != "{}" || m.b[node+36] != 1 || m.b[related+36] != 0 {
		t.Fatal("fixed-selector and cluster-scoped")
	}
	if u32(m, a+60) != 1 || m.b[a+64] != 1 || str(m, a+68) != fin {
		t.Fatal("crds and finalizer")
	}
}

func TestFieldErrorsLowerWithTheirOptionalValue(t *testing.T) {
	m := newFlat()
	v := "x"
	a := lowerFieldErrors(m, []FieldError{{Field: "spec.a", Kind: FieldTooLong, Value: &v, Detail: "d"}, {Field: "spec.b", Kind: FieldRequired}})
	items := u32(m, a)
	if u32(m, a+4) != 2 || str(m, items) != "spec.a" || m.b[items+8] != uint8(FieldTooLong) || m.b[items+12] != 1 || str(m, items+16) != "x" || str(m, items+24) != "d" {
		t.Fatal("first field error")
	}
	if m.b[items+fieldErrorSize+12] != 0 {
		t.Fatal("no value is none")
	}
}
