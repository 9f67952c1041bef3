// A chat backend in Node talking to `memoryd serve` with nothing but the global fetch
// (Node 18+). It stores a conversation's turns, ends the session, and reads back what the
// next prompt needs: the <memory-context> block and the session's recent turns.
//
//   MEMORYD_URL=http://127.0.0.1:8080 MEMORYD_KEY=mk_... node examples/node/chat-backend.mjs
//
// Prints one JSON object; exits 1 with the problem's detail if any call fails.

const base = process.env.MEMORYD_URL ?? "http://127.0.0.1:8080";
const key = process.env.MEMORYD_KEY;
const [agent, user, session] = ["support-bot", "u42", `node-${Date.now()}`];

async function call(method, path, body) {
  const res = await fetch(base + path, {
    method,
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const payload = await res.json();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${payload.detail}`);
  return payload;
}

const turn = (role, content, n) => ({
  agent_id: agent, user_id: user, session_id: session, role, content, turn_key: `${session}-${n}`,
});

try {
  const ingested = await call("POST", "/v1/turns", {
    turns: [
      turn("user", "Please remember that I am vegetarian.", 1),
      turn("assistant", "Noted: vegetarian.", 2),
      turn("user", "", 3), // rejected: the result says which item and why
    ],
  });
  await call("POST", `/v1/sessions/${agent}/${user}/${session}/end`);
  await call("POST", `/v1/memories/${agent}/${user}`, { content: "Vegetarian", category: "user" });
  const { context } = await call("POST", "/v1/context", {
    agent_id: agent, user_id: user, query: "what should I cook tonight? vegetarian",
  });
  const recent = await call("GET", `/v1/sessions/${agent}/${user}/${session}/context`);
  console.log(JSON.stringify({
    accepted: ingested.accepted,
    rejected: ingested.rejected.map((r) => `${r.index}:${r.errors[0].field}`),
    context,
    recent_turns: recent.recent_turns.length,
  }));
} catch (error) {
  console.error(String(error.message ?? error));
  process.exit(1);
}
