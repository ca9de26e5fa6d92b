// Package chatserver serves the policy as an OpenAI-compatible chat completions endpoint
// (POST /v1/chat/completions) on 127.0.0.1, for tasks whose episodes are run by an external
// environment that calls the model (the external_episode feature, e.g. gen_chat).
//
// Every request belongs to a trajectory: the host opens a session per trajectory (Open), whose
// API key (Authorization: Bearer KEY) or base URL (http://127.0.0.1:PORT/t/KEY/v1) ties the
// calls to it. The server renders the messages with the model's chat template, generates with
// the policy, and records for each call the exact prompt token ids, completion token ids and
// log-probs, so the trajectory trained on is exactly what was sampled. When a request repeats
// an earlier call's messages followed by the assistant message the server returned for it, the
// new prompt is that call's prompt + completion tokens followed by the new messages templated
// alone (as the tool agent loop appends observations): a conversation's prompts extend each
// other token for token, with no re-tokenisation of what the model wrote.
//
// Tool calls in a completion are parsed in the run's tool-call format (Options.ToolFormat:
// hermes <tool_call>{...}</tool_call> blocks, Llama 3's JSON, Mistral's [TOOL_CALLS]; by
// default the model's own, from its chat template) and returned as OpenAI tool_calls with
// finish_reason "tool_calls"; prompts are rendered with Options.TemplateKwargs. Supported request fields:
// messages, tools, temperature, top_p, max_tokens (or max_completion_tokens), n, logprobs,
// top_logprobs (only the sampled token is reported), stop. Responses carry two extra fields,
// prompt_token_ids and choices[].token_ids. Streaming is not supported (400).
//
// Errors: an unknown or closed key is 401, malformed JSON or an invalid request is 400, a
// generation failure is 500; bodies are OpenAI's {"error": {"message": ..., "type": ...}}.
package chatserver
