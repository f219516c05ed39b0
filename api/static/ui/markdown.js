// Thinking as Markdown: marked (vendored, MIT) with raw HTML escaped, then an allowlist pass over the result.

import { Marked } from "./vendor/marked.esm.js";

const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
const escapeHtml = (text) => String(text).replace(/[&<>"']/g, (c) => ESCAPES[c]);
const SAFE_URL = /^(https?:|mailto:|#|\/(?!\/))/i;
const ALLOWED = new Set([
  "P", "BR", "HR", "STRONG", "EM", "DEL", "CODE", "PRE", "BLOCKQUOTE", "UL", "OL", "LI", "A",
  "H1", "H2", "H3", "H4", "H5", "H6", "TABLE", "THEAD", "TBODY", "TR", "TH", "TD", "INPUT",
]);

const marked = new Marked({
  gfm: true,
  breaks: true,
  renderer: {
    html({ text }) { return escapeHtml(text); },
    link({ href, tokens }) {
      const text = this.parser.parseInline(tokens);
      return SAFE_URL.test(href) ? `<a href="${escapeHtml(href)}">${text}</a>` : text;
    },
    image({ text }) { return escapeHtml(text || ""); },
  },
});

function sanitise(root) {
  for (const element of [...root.querySelectorAll("*")]) {
    if (!ALLOWED.has(element.tagName) || (element.tagName === "INPUT" && element.type !== "checkbox")) {
      element.replaceWith(document.createTextNode(element.textContent));
      continue;
    }
    for (const attribute of [...element.attributes]) {
      const keep = (element.tagName === "A" && attribute.name === "href" && SAFE_URL.test(attribute.value))
        || (element.tagName === "INPUT" && ["type", "checked", "disabled"].includes(attribute.name))
        || (element.tagName === "OL" && attribute.name === "start");
      if (!keep) element.removeAttribute(attribute.name);
    }
    if (element.tagName === "A") Object.assign(element, { rel: "noopener noreferrer", target: "_blank" });
  }
}

/** Render untrusted Markdown into `target`: no raw HTML, no scripts, no remote images, only safe links. */
export function renderMarkdown(target, text) {
  const template = document.createElement("template");
  template.innerHTML = marked.parse(text);
  sanitise(template.content);
  target.replaceChildren(template.content);
}
