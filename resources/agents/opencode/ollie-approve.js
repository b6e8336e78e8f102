// ollie-approve plugin for OpenCode: asks Ollie (the tray) before OpenCode's own tools run.
// Written by `ollie-approve install --agent opencode`; `ollie-approve uninstall --agent opencode`
// removes it.  docs/agents/opencode.md.
//
// OpenCode's plugin API (sst/opencode, packages/plugin and its plugin documentation): a
// module exporting async functions of ({ directory, ... }) that return hooks;
// "tool.execute.before"(input: {tool, sessionID, callID}, output: {args}) may throw to
// stop the call, "permission.ask"(permission, output: {status}) may set "allow"/"deny".
// Each call goes to `ollie-approve --json` (docs/hooks.md): allow, deny, or ask (no
// answer from Ollie: OpenCode's own permission flow decides; never a silent allow).
import { spawn } from "node:child_process";

const OLLIE_APPROVE = "@OLLIE_APPROVE@";

// OpenCode's tools in the vocabulary ollie-approve judges (registry_core/agents/facts.py).
const TOOLS = {
  bash: ["Bash", {}],
  write: ["Write", { filePath: "file_path" }],
  edit: ["Edit", { filePath: "file_path", oldString: "old_string", newString: "new_string", replaceAll: "replace_all" }],
  read: ["Read", { filePath: "file_path" }],
  webfetch: ["WebFetch", {}],
};

function translate(tool, args) {
  const [name, renames] = TOOLS[tool] ?? [tool, {}];
  const input = {};
  for (const [key, value] of Object.entries(args ?? {})) input[renames[key] ?? key] = value;
  return [name, input];
}

function ask(request) {
  return new Promise((resolve) => {
    let out = "";
    let child;
    try {
      child = spawn(OLLIE_APPROVE, ["--json", "--agent", "opencode"], { stdio: ["pipe", "pipe", "inherit"] });
    } catch (err) {
      resolve({ decision: "ask", reason: `ollie-approve could not start: ${err}` });
      return;
    }
    child.on("error", (err) => resolve({ decision: "ask", reason: `ollie-approve could not start: ${err}` }));
    child.stdout.on("data", (chunk) => { out += chunk; });
    child.on("close", () => {
      try {
        const answer = JSON.parse(out);
        resolve({ decision: answer.decision ?? "ask", reason: answer.reason ?? "" });
      } catch {
        resolve({ decision: "ask", reason: "ollie-approve gave no answer" });
      }
    });
    child.stdin.end(JSON.stringify(request));
  });
}

export const OllieApprove = async ({ directory }) => {
  const decided = new Map(); // callID -> "allow" | "deny", for permission.ask
  return {
    "tool.execute.before": async (input, output) => {
      const [tool, args] = translate(input.tool, output.args);
      const answer = await ask({ agent: "opencode", tool, input: args, cwd: directory, session: input.sessionID });
      if (answer.decision === "deny") throw new Error(answer.reason || "denied in Ollie");
      if (answer.decision === "allow" && input.callID) decided.set(input.callID, "allow");
    },
    "permission.ask": async (permission, output) => {
      const verdict = permission.callID ? decided.get(permission.callID) : undefined;
      if (verdict) output.status = verdict;
    },
  };
};
