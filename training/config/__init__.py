"""What a training run is asked to do: ``train_config`` (``TrainConfig`` and its sections, YAML layers
merged and validated, unknown keys refused), ``recipe_tables`` (the ``--recipe`` starting points: one
per loss on a shared base, plus papers' own setups; tables only, read by ``--help`` without torch) and
``recipes`` (a recipe name resolved against the registered losses to its config layer); ``config_checks``
(what can be refused before torch loads: the dataset path, image sizes, names, a run directory already
in use, a ``--loss`` that replaces a recipe's) with ``known_names`` (the loss, recipe and backbone names
as torch-free tables), ``image_sizes`` (the smallest image a backbone can see: 32 px, or a transformer's
patch) and ``hub_access`` (``--pretrained hub``: the weights' repository, the consent to download, the
cache, and whether a CLIP run keeps its text tower). ``train_request`` (``TrainRequest``: one ``retrieval train`` or ``api.train()``
call as config layers, and the rules between options) and ``config_resolver`` (``resolve_config``: a
request under its recipe, validated) are the one config assembler that the CLI and the Python API share;
``option_vocabulary`` (``TRAIN_OPTIONS``: option name -> config key, the one vocabulary both speak: the
flags are declared from it and the API's keywords read through it, ``keyword_layer``);
``run_split`` (the records a run's ``data`` section keeps and how it splits them, torch-free, checked before
torch loads); ``loss_and_sampler`` builds what a config names for training (the loss, the sampler kind, the capped steps
of an epoch) for the trainer and the study alike."""
