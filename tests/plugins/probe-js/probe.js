// A test-only JavaScript plugin that misbehaves on request, as
// tests/plugins/hostile does in Rust: `spec.mode` of a `Hostile` picks what its
// reconcile tries. Probes report what they saw in one Event. A JavaScript
// plugin has no file, environment or socket API at all; `fetch` is the one
// door to the outside, and the build leaves wasi:http out (a call traps).

const modes = {
  fetch: () => {
    if (typeof fetch !== "function") return "denied: no fetch";
    try {
      fetch("http://127.0.0.1:1/");
      return "ESCAPED: fetch started";
    } catch (e) {
      return `denied: ${e}`;
    }
  },
  env: () => (typeof process === "undefined" ? "denied: no environment" : `ESCAPED: ${Object.keys(process.env).length} env vars`),
  clock: (now) => `clock=${Date.now()} now=${now}`,
  loop: () => {
    for (;;) {}
  },
  memory: () => {
    const hoard = [];
    for (;;) hoard.push(new Uint8Array(1 << 20).fill(1));
  },
  error: () => {
    throw { reason: "Refused", message: "asked to fail", retryable: false };
  },
  exception: () => {
    throw new Error("probe threw on purpose");
  },
};

export const controller = {
  manifest() {
    return { name: "probe-js", version: "0.1.0", parent: { group: "test.operator.dev", version: "v1", kind: "Hostile" }, children: [], crds: [], finalizer: undefined };
  },
  reconcile(parent, _children, now) {
    const mode = JSON.parse(parent).spec.mode;
    const message = modes[mode](now);
    return [{ tag: "event", val: { eventType: "normal", reason: "Probe", message } }];
  },
  validate(_object, _old) {
    return [];
  },
  default(object) {
    return object;
  },
};
