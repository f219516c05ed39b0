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

  /** Parse a chunk of the body. */
  push(bytes) {
    this.buffer += this.decoder.decode(bytes, { stream: true });
    let end;
    while ((end = this.buffer.search(/\r\n|\r|\n/)) >= 0) {
      const line = this.buffer.slice(0, end);
      const eol = this.buffer.startsWith("\r\n", end) ? 2 : 1;
      if (this.buffer[end] === "\r" && end + 1 === this.buffer.length) break; // maybe \r\n split across chunks
      this.buffer = this.buffer.slice(end + eol);
      this.line(line);
    }
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
