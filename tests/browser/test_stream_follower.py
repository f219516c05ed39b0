"""The page's stream follower in the browser, with `fetch` stood in for: backoff, polling, no repeat, no gap."""

from __future__ import annotations

from typing import Any

from tests.support.server import RunningServer

FOLLOW = """async () => {
  const { StreamFollower, TIMING } = await import('/ui/follow.js');
  TIMING.backoffSeconds = [0.01, 0.01, 0.01, 0.01, 0.01];
  TIMING.pollSeconds = 0.02;
  sessionStorage.setItem('flowtrail.apiKey', 'the-key');
  const frame = (id, event, data) => `id: ${id}\\nevent: ${event}\\ndata: ${JSON.stringify(data)}\\n\\n`;
  const running = { nodeId: 'n', visitUuid: 'v', status: 'RUNNING', nodeType: 'agent', nodeLabel: 'N' };
  const thinking = (text) => ({ nodeId: 'n', visitUuid: 'v', kind: 'thinking', content: text, toolName: null });
  const first = frame(1, 'node_status', running) + frame(2, 'node_stream', thinking('a')) + 'id: 3\\nevent: node_st';
  const rest = frame(2, 'node_stream', thinking('a')) + frame(3, 'node_stream', thinking('b'))
    + frame(4, 'workflow_complete', { output: {}, success: true, workingDirFiles: [] });
  const calls = [];
  let streams = 0;
  window.fetch = async (url, init) => {
    const path = new URL(url, location.href).pathname;
    calls.push({ path, lastEventId: init.headers['Last-Event-ID'] ?? null, key: init.headers['X-API-Key'] });
    if (!path.endsWith('/stream')) {
      return new Response(JSON.stringify({ code: 0, message: 'ok', data: { status: 'RUNNING' } }));
    }
    streams += 1;
    if (streams === 1) {
      return new Response(new ReadableStream({ start(body) {
        body.enqueue(new TextEncoder().encode(first));
        setTimeout(() => body.error(new TypeError('network error')), 20);
      } }));
    }
    if (streams <= 7) throw new TypeError('Failed to fetch');
    return new Response(rest);
  };
  const states = [];
  const ids = [];
  const follower = new StreamFollower({
    workflowName: 'w', runId: 'r', onMessages: (batch) => ids.push(...batch.map((m) => m.id)),
    onState: (s) => states.push(s.state), onResult: (r) => states.push('result ' + r.status),
  });
  await follower.start();
  return { states, ids, calls };
}"""


async def test_after_five_failed_reconnects_the_follower_polls_then_resumes_with_every_id_once(
    page: Any, files_server: RunningServer
) -> None:
    await page.goto(f"{files_server.base_url}/ui/")
    got = await page.evaluate(FOLLOW)

    assert got["ids"] == [1, 2, 3, 4]
    assert got["states"] == [
        "live", *["reconnecting"] * 5, "polling", "result RUNNING", "polling", "result RUNNING", "live", "ended",
    ]
    streams = [c for c in got["calls"] if c["path"].endswith("/stream")]
    assert [c["lastEventId"] for c in streams] == [None] + ["2"] * 7
    assert {c["key"] for c in got["calls"]} == {"the-key"}
    assert all("the-key" not in c["path"] for c in got["calls"])
