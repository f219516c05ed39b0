// A tiny element builder: text is always set as text, never parsed as HTML.

/** `h("div", {class: "x", dataset: {id: 1}}, child, "text")`: an element with attributes and children. */
export function h(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "dataset") Object.assign(element.dataset, value);
    else if (name.startsWith("on")) element.addEventListener(name.slice(2), value);
    else if (name in element && typeof value !== "string") element[name] = value;
    else element.setAttribute(name, value === true ? "" : value);
  }
  element.append(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
  return element;
}

/** A status badge. */
export function badge(status) {
  return h("span", { class: `badge badge-${String(status).toLowerCase()}` }, status);
}

/** JSON as indented text. */
export function pretty(value) {
  return typeof value === "string" ? value : JSON.stringify(value, null, 2);
}
