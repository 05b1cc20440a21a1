// The hello example plugin in JavaScript: each `Hello` (group
// `example.operator.dev`) keeps one ConfigMap named `<name>-greeting` holding
// `spec.greeting`, and reports in its status whether the ConfigMap is up to date.
//
// Same behaviour as the Rust plugins/examples/hello; the host's tests compare
// the three on the same fixtures. componentize-js maps the WIT world in wit/
// to this module: the `controller` export is an object with the interface's
// functions, records are objects with camelCase fields, variants are
// `{ tag, val }`, enums are strings, and a thrown value is a `result`'s error.

const GROUP = "example.operator.dev";
const VERSION = "0.1.0";
const MAX_GREETING_BYTES = 64;

export const controller = {
  manifest() {
    return {
      name: "hello-js",
      version: VERSION,
      parent: { group: GROUP, version: "v1alpha1", kind: "Hello" },
      children: [{ group: "", version: "v1", kind: "ConfigMap" }],
      crds: [JSON.stringify(crd())],
      finalizer: undefined,
    };
  },

  reconcile(parent, children, _now) {
    const hello = parse(parent);
    const greeting = greetingOf(hello) ?? "Hello";
    const name = `${hello.metadata.name}-greeting`;
    const desired = { greeting };
    const existing = children.map(parse).find((c) => c.kind === "ConfigMap" && c.metadata?.name === name);
    const actions = [];
    if (existing === undefined) {
      const configMap = { apiVersion: "v1", kind: "ConfigMap", metadata: { name }, data: desired };
      actions.push({ tag: "create", val: JSON.stringify(configMap) });
      actions.push({ tag: "event", val: { eventType: "normal", reason: "Created", message: `created ConfigMap ${name}` } });
    } else if (!holdsOnly(existing.data, desired)) {
      actions.push({ tag: "patch", val: { target: objectRef(existing), patch: JSON.stringify({ data: desired }) } });
    }
    actions.push({ tag: "set-status", val: JSON.stringify({ upToDate: actions.length === 0 }) });
    return actions;
  },

  validate(object, _old) {
    const greeting = greetingOf(parse(object));
    if (greeting !== undefined && new TextEncoder().encode(greeting).length > MAX_GREETING_BYTES) {
      return [{ field: "spec.greeting", kind: "too-long", value: greeting, detail: `must have at most ${MAX_GREETING_BYTES} bytes` }];
    }
    return [];
  },

  default(object) {
    const hello = parse(object);
    hello.spec ??= {};
    hello.spec.greeting ??= "Hello";
    return JSON.stringify(hello);
  },
};

// Objects arrive as JSON text; a malformed one is the contract's error, not a trap.
function parse(text) {
  try {
    return JSON.parse(text);
  } catch (e) {
    throw { reason: "InvalidObject", message: `not JSON: ${e.message}`, retryable: false };
  }
}

function greetingOf(object) {
  const greeting = object.spec?.greeting;
  return typeof greeting === "string" ? greeting : undefined;
}

// True when `data` is exactly `desired` (string values only, as in a ConfigMap).
function holdsOnly(data, desired) {
  if (data === null || typeof data !== "object" || Array.isArray(data)) return false;
  const keys = Object.keys(data);
  return keys.length === Object.keys(desired).length && keys.every((k) => data[k] === desired[k]);
}

function objectRef(object) {
  const { apiVersion, kind, metadata } = object;
  return { apiVersion, kind, namespace: metadata.namespace ?? "", name: metadata.name };
}

function crd() {
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: `hellos.${GROUP}` },
    spec: {
      group: GROUP,
      names: { kind: "Hello", plural: "hellos", singular: "hello", listKind: "HelloList" },
      scope: "Namespaced",
      versions: [{
        name: "v1alpha1", served: true, storage: true,
        subresources: { status: {} },
        schema: { openAPIV3Schema: {
          type: "object",
          properties: {
            spec: { type: "object", properties: { greeting: { type: "string", maxLength: 64 } } },
            status: { type: "object", properties: {
              upToDate: { type: "boolean" },
              // The host writes its `Reconciled` condition here; a schema
              // without it would prune the condition away.
              conditions: { type: "array", items: { type: "object", "x-kubernetes-preserve-unknown-fields": true } },
            } },
          },
        } },
      }],
    },
  };
}
