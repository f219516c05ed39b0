// A Server-Sent Events parser for fetch + ReadableStream (the WHATWG "event stream interpretation").

/** Feeds bytes in, calls `onMessage({id, event, data})` for every complete message; a cut-off message is dropped. */
export class SseParser {
  constructor(onMessage) {
    this.onMessage = onMessage;
    this.decoder = new TextDecoder();
    this.buffer = "";
    this.reset();
  }

  reset() {
    this.data = [];
    this.event = "";
    this.id = null;
  }

  /** Parse a chunk of the body (one pass over it: lines are cut by index, the rest kept for the next chunk). */
  push(bytes) {
    const text = this.buffer + this.decoder.decode(bytes, { stream: true });
    const endOfLine = /\r\n|\r|\n/g;
    let start = 0;
    let found;
    while ((found = endOfLine.exec(text)) !== null) {
      if (found[0] === "\r" && found.index + 1 === text.length) break; // a \r\n may be split across chunks
      this.line(text.slice(start, found.index));
      start = endOfLine.lastIndex;
    }
    this.buffer = text.slice(start);
  }

  line(line) {
    if (line === "") {
      if (this.data.length) this.onMessage({ id: this.id, event: this.event || "message", data: this.data.join("\n") });
      this.reset();
      return;
    }
    if (line.startsWith(":")) return;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "data") this.data.push(value);
    else if (field === "event") this.event = value;
    else if (field === "id" && !value.includes("\0")) this.id = value;
  }
}
