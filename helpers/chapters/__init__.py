"""Each chapter's experiments, one package per chapter, named after its notebook.

``helpers/chapters/chNN_<notebook>/`` holds the code that only chapter NN's notebook (and its lab)
runs: benchmarks that record its measurements, its figures, its demonstrations. Reusable code lives
in the core packages beside this one (``kernels``, ``quant``, ``models``, ``perf``, ``model_quant``,
``deploy``) and never imports from here; a chapter may build on an earlier chapter's experiments.
Each chapter package's docstring lists the core modules its notebook uses as well.
``tests/tools/test_layout.py`` enforces the direction.

Serves: the chapter map (every chapter).
"""
