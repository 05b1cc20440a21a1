package plugin

// The contract operator:plugin@0.3.0 (wit/v0.3/plugin.wit) as Go values. These
// are what crosses the boundary; the canonical ABI (abi.go) lifts and
// lowers exactly these shapes.

// GroupVersionKind names a kind; the core group is "".
type GroupVersionKind struct {
	Group, Version, Kind string
}

// APIVersion is "group/version", or "version" for the core group.
func (g GroupVersionKind) APIVersion() string {
	if g.Group == "" {
		return g.Version
	}
	return g.Group + "/" + g.Version
}

// AttachmentKind is how objects of a related kind attach to a parent.
type AttachmentKind uint8

const (
	// SelectorFrom: a label selector read from a field of the parent.
	SelectorFrom AttachmentKind = iota
	// NamesFrom: names read from fields of the parent.
	NamesFrom
	// FixedSelector: every object a fixed label selector (JSON) picks.
	FixedSelector
)

// Attachment is the WIT variant `attachment`.
type Attachment struct {
	Kind AttachmentKind
	// The field path (SelectorFrom) or the selector's JSON (FixedSelector).
	Text string
	// The field paths (NamesFrom).
	Paths []string
}

// RelatedKind is a kind the plugin reads but does not control.
type RelatedKind struct {
	Kind          GroupVersionKind
	Attach        Attachment
	ClusterScoped bool
}

// Manifest is what a plugin is and what it controls.
type Manifest struct {
	Name, Version string
	Parent        GroupVersionKind
	Children      []GroupVersionKind
	Related       []RelatedKind
	// CRDs to install, each JSON text of an apiextensions.k8s.io/v1 object.
	CRDs      []string
	Finalizer *string
}

// ObjectRef points at one object.
type ObjectRef struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
}

// Propagation is what happens to a deleted object's dependents.
type Propagation uint8

const (
	Background Propagation = iota
	Foreground
	Orphan
)

func (p Propagation) String() string {
	return [...]string{"Background", "Foreground", "Orphan"}[p]
}

// EventType is Normal or Warning.
type EventType uint8

const (
	Normal EventType = iota
	Warning
)

func (t EventType) String() string {
	return [...]string{"Normal", "Warning"}[t]
}

// ActionKind is the case of the WIT variant `action`.
type ActionKind uint8

const (
	ActCreate ActionKind = iota
	ActReplace
	ActPatch
	ActDelete
	ActSetStatus
	ActEvent
	ActRequeueAfter
	ActFinalized
)

// Action is one thing the plugin wants done. Which fields are meaningful
// depends on Kind: Text for create / replace / set-status (JSON) and for a
// patch's document; Target for patch and delete; Propagation for delete;
// EventType, Reason and Message for event; Millis for requeue-after.
type Action struct {
	Kind        ActionKind
	Text        string
	Target      ObjectRef
	Propagation Propagation
	EventType   EventType
	Reason      string
	Message     string
	Millis      uint64
}

// Step is the 0.3 `desired.step`: an action, or a child to apply.
type Step struct {
	// Apply, when non-empty, is the child as the plugin wants it (JSON);
	// otherwise Act is the step.
	Apply string
	Act   Action
}

// ReconcileError is why a reconcile produced no actions.
type ReconcileError struct {
	Reason    string `json:"reason"`
	Message   string `json:"message"`
	Retryable bool   `json:"retryable"`
}

func (e *ReconcileError) Error() string { return e.Reason + ": " + e.Message }

// FieldErrorKind is how a field is wrong, as the API server's StatusCause types.
type FieldErrorKind uint8

const (
	FieldRequired FieldErrorKind = iota
	FieldInvalid
	FieldNotSupported
	FieldForbidden
	FieldTooLong
	FieldDuplicate
)

// FieldError is one problem with one field of an object.
type FieldError struct {
	Field  string
	Kind   FieldErrorKind
	Value  *string
	Detail string
}
