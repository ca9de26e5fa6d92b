// Package tokenizer turns text into token ids and back, and renders chat
// templates, exactly as the Hugging Face Python stack does for the same model.
//
// A [Tokenizer] is loaded with [Load] from
//   - a Hugging Face model directory (tokenizer.json, tokenizer_config.json and,
//     if present, chat_template.jinja),
//   - a lone tokenizer.json file, or
//   - a GGUF model file, whose tokenizer.ggml.* metadata is converted to an
//     equivalent tokenizer.json (see [FromGGUF]).
//
// Encoding and decoding run in the Rust tokenizers library through
// github.com/daulet/tokenizers (cgo; the static library libtokenizers.a is
// built by `make tokenizers-lib`, which also sets CGO_LDFLAGS).
//
// [Tokenizer.ApplyChatTemplate] renders the model's own Jinja chat template
// with messages, OpenAI function schemas as tools, and add_generation_prompt,
// byte for byte as transformers' apply_chat_template does (the engine is
// github.com/nikolalohinski/gonja/v2 configured and extended the way
// transformers configures jinja2; see docs/tokenizer.md).
// [Tokenizer.ApplyChatTemplateKwargs] passes extra template variables (e.g.
// Qwen3's enable_thinking). [Tokenizer.RenderObservation] templates tool or
// user observation messages on
// their own, without the template's default system prefix, for appending to a
// running token sequence. [ParseToolCalls] reads the tool calls a model
// writes in its family's format ([ToolFormat]: hermes <tool_call> blocks,
// Llama 3's JSON, Mistral's [TOOL_CALLS]), as vLLM's parsers do;
// [FormatToolCalls] writes them; [Tokenizer.DetectToolFormat] picks the
// format from the chat template and special tokens.
//
// Errors are prefixed with "tokenizer: " and name the file, key or template
// line at fault.
package tokenizer
