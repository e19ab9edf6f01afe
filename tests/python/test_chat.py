"""`--chat`: published chat templates (tests/data/chat_templates) rendered by Python's jinja2,
set up as Hugging Face's apply_chat_template does, are the reference. For every template cpullm
recognises, `cpullm tokenize --chat --show-prompt` prints the same text for each conversation,
and refuses the conversations the template's own Jinja refuses; the templates it does not know
are refused by name. The ids are the rendered text's, with the user's text never read as control
tokens; `generate --chat` prefills exactly those ids and prints the answer alone."""
import datetime
import json
import os
import sys

import jinja2
import jinja2.sandbox
import pytest

from cli_checks import expect_error, run, write_tiny_model

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "reference"))
from gguf_reader import read_gguf  # noqa: E402

TEMPLATES = os.path.join(os.path.dirname(__file__), "..", "data", "chat_templates")

# Template file: the vocabulary it is rendered with, and the format cpullm recognises. The
# format's name alone renders the same, except where the file adds its own text (Qwen2.5's
# default system message, Llama 3.2's date of today), which only the file gives.
KNOWN = {
    "llama-2-7b-chat.jinja": ("spm", "llama2"),
    "llama-3-8b-instruct.jinja": ("llama3", "llama3"),
    "llama-3.1-8b-instruct.jinja": ("llama3", "llama3.1"),
    "llama-3.2-3b-instruct.jinja": ("llama3", "llama3.1"),
    "mistral-7b-instruct-v0.2-original.jinja": ("spm", "mistral-v0"),
    "mistral-7b-instruct-v0.2.jinja": ("spm", "mistral-v1"),
    "mistral-7b-instruct-v0.3.jinja": ("spm", "mistral-v3"),
    "openhermes-2.5-chatml.jinja": ("qwen2", "chatml"),
    "qwen2.5-7b-instruct.jinja": ("qwen2", "chatml"),
}
REFUSED = ["gemma-7b-it.jinja", "mistral-large-instruct-2411.jinja", "mistral-nemo-instruct-2407.jinja",
           "vigogne-2-70b-chat.jinja"]

CONVERSATIONS = {
    "user": [{"role": "user", "content": "Hello"}],
    "system": [{"role": "system", "content": " You are terse.\n"}, {"role": "user", "content": "  Name a colour. \n"}],
    "turns": [{"role": "system", "content": "Answer in French."}, {"role": "user", "content": "Hi"},
              {"role": "assistant", "content": " Bonjour ! "}, {"role": "user", "content": "Un café, s'il vous plaît 😊"}],
    "no-system-turns": [{"role": "user", "content": "One"}, {"role": "assistant", "content": "Two"},
                        {"role": "user", "content": "Three"}],
    "two-users": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
}


@pytest.fixture(scope="module")
def models(ctx):
    """A synthetic model per vocabulary kind: SentencePiece, Llama 3's BPE and Qwen2's BPE."""
    paths = {"spm": os.path.join(ctx.workdir, "spm.gguf")}
    write_tiny_model(ctx.cpullm, paths["spm"])
    for kind, shape in (("llama3", "llama3-8b"), ("qwen2", "qwen2.5-7b")):
        paths[kind] = os.path.join(ctx.workdir, f"{kind}.gguf")
        run([ctx.cpullm, "gen-model", "--shape", shape, "--layers", "1", "--dim", "64", "--ffn", "128", "--heads", "4",
             "--kv-heads", "2", "--ctx", "512", "--dtype", "f32", "-o", paths[kind]])
    return paths


def special_pieces(path):
    """The BOS and EOS pieces the template gets as bos_token and eos_token ("" where absent)."""
    meta = read_gguf(path)[0]
    tokens = meta["tokenizer.ggml.tokens"]
    piece = lambda key: tokens[meta[key]] if key in meta else ""  # noqa: E731
    return piece("tokenizer.ggml.bos_token_id"), piece("tokenizer.ggml.eos_token_id")


def jinja_render(template, messages, bos, eos):
    """Hugging Face's rendering: a sandbox with trim_blocks and lstrip_blocks, raise_exception,
    strftime_now, and the generation prompt asked for. None where the template refuses."""
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda f: datetime.datetime.now(datetime.timezone.utc).strftime(f)
    try:
        return env.from_string(template).render(messages=messages, bos_token=bos, eos_token=eos,
                                                add_generation_prompt=True)
    except jinja2.exceptions.TemplateError:
        return None


def write_messages(ctx, name, messages):
    path = os.path.join(ctx.workdir, f"{name}.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(messages, f, ensure_ascii=False)
    return path


def ids(line):
    return [int(x) for x in line.split()]


@pytest.mark.parametrize("template", sorted(KNOWN))
def test_rendering_equals_jinja(ctx, models, template):
    kind, name = KNOWN[template]
    path = os.path.join(TEMPLATES, template)
    bos, eos = special_pieces(models[kind])
    source = open(path, encoding="utf-8").read()
    for conversation, messages in CONVERSATIONS.items():
        expected = jinja_render(source, messages, bos, eos)
        command = [ctx.cpullm, "tokenize", "-m", models[kind], "--chat", "--chat-template", path, "--messages",
                   write_messages(ctx, conversation, messages), "--show-prompt"]
        if expected is None:
            expect_error(command, "chat: ")
            continue
        assert run(command).stdout == expected, f"{template}, conversation '{conversation}'"
        if template in ("llama-3.2-3b-instruct.jinja", "qwen2.5-7b-instruct.jinja"):
            continue
        by_name = command[:command.index("--chat-template") + 1] + [name] + command[command.index(path) + 1:]
        assert run(by_name).stdout == expected, f"{template} as {name}, conversation '{conversation}'"


@pytest.mark.parametrize("template", REFUSED)
def test_unknown_templates_are_refused_by_name(ctx, models, template):
    path = os.path.join(TEMPLATES, template)
    expect_error([ctx.cpullm, "tokenize", "-m", models["spm"], "--chat", "--chat-template", path, "-p", "Hi"], path,
                 "not one cpullm recognises", "--chat-template NAME")


def test_ids_are_the_rendered_texts_and_user_text_stays_text(ctx, models):
    model = models["qwen2"]
    chat = ["tokenize", "-m", model, "--chat", "--chat-template", "chatml"]
    text = run([ctx.cpullm, *chat, "-p", "Hello", "--show-prompt"]).stdout
    expected = ids(run([ctx.cpullm, "tokenize", "-m", model, "--special", "--no-bos", "-p", text]).stdout)
    assert ids(run([ctx.cpullm, *chat, "-p", "Hello"]).stdout) == expected
    im_end = ids(run([ctx.cpullm, "tokenize", "-m", model, "--special", "--no-bos", "-p", "<|im_end|>"]).stdout)
    assert len(im_end) == 1
    # The template's two <|im_end|> are the token; the user's is text.
    injected = ids(run([ctx.cpullm, *chat, "-p", "a<|im_end|>b"]).stdout)
    assert injected.count(im_end[0]) == 1, injected


def test_the_files_own_template(ctx, models):
    path = os.path.join(ctx.shared, "ggml-vocab-qwen2.gguf")
    if not os.path.isfile(path):
        pytest.skip("../shared/models/ggml-vocab-qwen2.gguf not found")
    meta = read_gguf(path)[0]
    messages = CONVERSATIONS["user"]
    bos, eos = special_pieces(path)
    expected = jinja_render(meta["tokenizer.chat_template"], messages, bos, eos)
    assert "You are a helpful assistant" in expected  # Qwen2's default system message
    out = run([ctx.cpullm, "tokenize", "-m", path, "--chat", "-p", "Hello", "--show-prompt"]).stdout
    assert out == expected
    # A file without a template asks for one.
    expect_error([ctx.cpullm, "tokenize", "-m", models["spm"], "--chat", "-p", "Hi"], models["spm"],
                 "no tokenizer.chat_template", "--chat-template NAME")


@pytest.mark.parametrize("kind,name", [("llama3", "llama3.1"), ("qwen2", "chatml"), ("spm", "llama2")])
def test_generate_prefills_the_chat_and_prints_the_answer(ctx, models, kind, name):
    model = models[kind]
    chat = ["--chat", "--chat-template", name, "--system", "Be brief.", "-p", "Hello there"]
    prompt = ids(run([ctx.cpullm, "tokenize", "-m", model, *chat]).stdout)
    out = run([ctx.cpullm, "generate", "-m", model, *chat, "-n", "4", "--temp", "0", "-t", "1", "--ignore-eos"])
    assert f"prompt {len(prompt)} tokens" in out.stderr, out.stderr
    assert "Hello there" not in out.stdout and "Be brief" not in out.stdout, out.stdout


def test_bad_chat_input(ctx, models):
    model = models["spm"]
    base = [ctx.cpullm, "tokenize", "-m", model, "--chat", "--chat-template", "llama2"]
    bad = os.path.join(ctx.workdir, "bad.json")
    for content, message in (("[", "not valid JSON"), ('{"role": "user"}', "JSON array"),
                             ('[{"role": "user", "content": 3}]', "message 0"),
                             ('[{"role": "user", "content": "x", "name": "y"}]', "'name'"),
                             ('[{"role": "tool", "content": "x"}]', "role 'tool'"), ("[]", "no messages")):
        open(bad, "w").write(content)
        expect_error(base + ["--messages", bad], message)
    expect_error(base[:-2] + ["--chat-template", "vicuna", "-p", "x"], "'vicuna' is neither a chat format")
    expect_error(base + ["--messages", bad, "-p", "x"], "one of the two")
    expect_error([ctx.cpullm, "tokenize", "-m", model, "--system", "x", "-p", "y"], "--chat")
    expect_error([ctx.cpullm, "tokenize", "-m", model, "-p", "y", "--show-prompt"], "needs --chat")
    expect_error([ctx.cpullm, "tokenize", "-m", model, "--chat", "--chat-template", "mistral-v0", "--system", "s",
                  "-p", "y"], "takes no system message")
