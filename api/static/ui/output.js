// An output as its fields: text as Markdown, arrays as lists, files as links, objects as named fields; never the envelope.

import { h, pretty } from "./dom.js";
import { renderMarkdown } from "./markdown.js";

const WEB_LINK = /^https?:\/\/[^\s]+$/i;
const MAX_DEPTH = 4;

/** The fields of an output: the `data` of a `{status, message, data}` envelope, else the value itself. */
export function payloadOf(output) {
  const enveloped = output && typeof output === "object" && !Array.isArray(output) && "data" in output && "status" in output;
  return enveloped ? output.data : output;
}

/**
 * `output` rendered by its fields. `types` maps a field name to its declared type (a workflow's outputs: `filePath`
 * fields are files); `files` are the run's workspace files; `onFile(path)` opens one (a link is shown for each).
 */
export function outputFields(output, { types = {}, files = [], onFile = null } = {}) {
  const context = { types, files: new Set(files), onFile };
  const payload = payloadOf(output);
  return h("div", { class: "output fields" }, field(payload, "", context, 0),
    h("details", { class: "raw" }, h("summary", {}, "As JSON"), h("pre", {}, pretty(output))));
}

function field(value, name, context, depth) {
  if (value === null || value === undefined) return h("span", { class: "muted" }, "none");
  if (Array.isArray(value)) {
    if (!value.length) return h("span", { class: "muted" }, "empty list");
    return h("ul", { class: "field-list" }, ...value.map((item) => h("li", {}, field(item, name, context, depth + 1))));
  }
  if (typeof value === "object") {
    if (depth >= MAX_DEPTH) return h("pre", {}, pretty(value));
    const entries = Object.entries(value);
    if (!entries.length) return h("span", { class: "muted" }, "empty");
    return h("dl", { class: "field-map" }, ...entries.flatMap(([key, item]) => [
      h("dt", {}, key), h("dd", { dataset: { field: key } }, field(item, key, context, depth + 1))]));
  }
  if (typeof value !== "string") return h("span", { class: "scalar" }, String(value));
  if (context.types[name] === "filePath" || context.files.has(value)) return fileLink(value, context);
  if (WEB_LINK.test(value)) return h("a", { href: value, rel: "noopener noreferrer", target: "_blank" }, value);
  const text = h("div", { class: "markdown" });
  renderMarkdown(text, value);
  return text;
}

/** A file's name as a link that downloads the run's workspace (`context.onFile`), or as code without one. */
export function fileLink(path, context) {
  if (!context.onFile) return h("code", {}, path);
  return h("a", { href: "#", class: "file-link", title: "Downloads the run's workspace (zip)", dataset: { file: path },
    onclick: (event) => { event.preventDefault(); context.onFile(path); } }, path);
}
