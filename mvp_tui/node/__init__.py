"""mvp-node: the node agent. It fetches the model, serves it with llama.cpp, and reports.

Standard library only; it runs on the node's own `python3` (3.8 or later). It ships as one
file, the zipapp `mvp_tui/agent_bundle.py` makes of this package and the few stdlib-only modules
it shares with the app (`mvp_tui.node_protocol`, `mvp_tui.untrusted`, `mvp_tui.secrets`):
over SFTP into the run directory, down a Docker container's stdin, or as the local
provider's child process; all run `python3 agent.pyz`. Configuration comes from the
environment (the seed's `MVP_*` keys, each declared once in `mvp_tui.node_protocol`:
`AgentEnv`, `RoleEnv`, `SwitchEnv`).

Modules, one job each: settings (the env, parsed once), frames (stdout frames, redacted),
control (stdin/fifo control lines and the agent's inbox), probe (environment and GPUs), hub
(the hub's word on a file), download (the model, resumable), prefetch (adopting the start
command's fetch), engine (llama.cpp's server as a child), gate (the key-checking proxy),
instance_api and switch (the dead-man's switch), agent and roles (the phases, per role), main
(the entry point), follow (the log reader and stopper over SSH: `agent.pyz follow|stop`).

Everything it reports goes to stdout as frame lines, one JSON object per line:
    {"mvp_frame": 1, "channel": "<name>", "payload": <JSON value>}
Nothing else is ever written to stdout; diagnostics go to stderr. Channels:
- `mvp.node.<N>.agent` (N = MVP_LOGICAL_NODE_ID): `NodeAgentPhase` records, each phase
  `started` then `ready` | `failed` with `elapsed_ms` and a detail; `NodeAgentProgress`
  records for downloads and engine loading; `NodeAgentNotice` for odd input.
- `mvp.worker.weights`: one `WeightsLoaded` record when the engine answers, or `WorkerFatal`
  (reason, fix, exit code, last engine log lines) when the node cannot serve.
- `mvp.node.<N>.engine`: the engine's log, one frame per line, control characters and
  escape sequences removed, length bounded.

Phases: config, watchdog (the dead-man's switch's verdict, below; only when configured),
probe (environment and GPUs), model (local file or Hugging Face download, resumable),
engine_start, engine_health (503 "loading" is progress), watch (until shutdown or the engine
dies), shutdown. `shutdown` on stdin, SIGTERM/SIGINT, or a line `shutdown` written to the
control fifo (MVP_CONTROL_FIFO) stops the engine and exits 0.
Exit codes: 0 stopped on request (or by the switch), 1 the node failed (WorkerFatal),
2 bad configuration.

Values of HF_TOKEN and of any environment variable whose name holds KEY, TOKEN, SECRET or
PASSWORD never appear in anything it prints, and are not passed on to the engine; nor does
the instance key the switch reads from the provider's env file.

The dead-man's switch bounds the node's bill when no dashboard does. Inputs (all optional):
MVP_WATCHDOG_PROVIDER (else MVP_NODE_PROVIDER): vastai | runpod | local | docker;
MVP_LEASE_STARTED_AT (unix s) and MVP_MAX_HOURS (fractional: 0.01 = 36 s) give the
deadline; MVP_IDLE_TEARDOWN_MINS the silence limit; MVP_VASTAI_API_URL /
MVP_RUNPOD_API_URL the API base; MVP_NODE_PROVIDER_ENV_FILE (default /proc/1/environ) where
the instance's own credentials are read when the agent's environment lacks them (an agent
started over SSH does not see PID 1's environment): CONTAINER_ID + CONTAINER_API_KEY on
Vast, RUNPOD_POD_ID + RUNPOD_API_KEY on RunPod. Never the account key.
- Verdict, right after config: a `watchdog` phase `ready` {provider, instance_id,
  deadline_at, idle_teardown_mins, armed, ...} once a harmless authenticated read of the
  instance's own record worked (Vast: GET /api/v0/instances/{id}/; RunPod: GET /pods/{id}),
  or `failed` with a one-line `reason` naming the fix. A failed verdict does not stop the
  agent: the dashboard decides ([limits] require_node_watchdog).
- Control lines (stdin or the control fifo): `heartbeat` resets the silence timer, `detach`
  disarms the silence switch (the deadline stays), `attach` re-arms it (and counts as a
  heartbeat). The silence timer starts when the agent starts.
- Firing (deadline passed, or silence while armed): a `watchdog` phase `started` {trigger:
  deadline | idle}, the engine stops cleanly, then on vastai/runpod the agent DELETEs its own
  instance with back-off (capped at 30 s) until the instance-scoped GET says it is gone, and
  writes `watchdog` `ready` {destroyed: true, trigger}; it never gives up (each failure is a
  notice). On local/docker nodes the engine and the agent end instead (`ready` {destroyed:
  false, ended: true}); exit code 0 either way. MVP_WATCHDOG_RETRY_INITIAL_S (default 1)
  is the first retry pause, for tests.
The switch lives in this process: a fatal node error that ends the agent ends it too.

The gate (MVP_API_KEY, the run's key; or MVP_IDLE_STOP_MINS > 0): the engine listens on a
private loopback port and the agent serves the engine's port itself, passing on only requests
with `Authorization: Bearer <key>` (else 401) for a loopback Host (else 403), streamed as they
come; POST /mvp/webui with the key gives the engine's web UI a cookie. llama-server also gets
the key as LLAMA_API_KEY. WeightsLoaded then says `auth: "key"` and the gate's port.
Idle stop (MVP_IDLE_STOP_MINS): every POST through the gate, or a `use` control line, counts
as use; with none for the window (counted from when the engine serves) the switch fires with
trigger `idle_stop` (a `detach` leaves it armed). NodeAgentProgress `watchdog` records say
`idle_stop_armed`, `idle_stop_warning` {stops_in_s} and `idle_stop_postponed`.
"""
