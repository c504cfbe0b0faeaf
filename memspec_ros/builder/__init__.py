"""``memspec_build``: from a user's target model and corpora to a ready catalogue.

A robot team brings a target (any Hugging Face causal LM in safetensors, with its own
tokenizer) and one text corpus per domain; three subcommands turn them into the folder the
node serves (docs/build.md):

* ``drafts``: splits the corpora by document (95/5), measures the target and picks a draft
  size this machine can afford, distils one small Llama-style draft per domain plus a
  ``general`` one from the target (its tokenizer, its logit width), writes ``catalogue.yaml``;
* ``predictor``: records exact traces of multi-domain dialogues over training documents and
  fits the draft-need predictor; adds it to the catalogue;
* ``evaluate``: acceptance matrix on held-out text, step times, a verdict per draft.

Every step is stamped with a hash of its inputs, so a rerun skips what is finished
(:mod:`.steps`); every user mistake ends with exit code 2 and one message saying what to fix
(:class:`.errors.BuildError`). Nothing here imports the repository's ``training/`` folder: this
package is installed, and ``training/`` (the bundled zoo's build) imports from here instead.
"""
