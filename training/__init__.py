"""``retrieval.training``: everything that needs torch. Sub-packages, lowest first (a package imports only
the ones before it): ``losses`` < ``config`` < ``model`` < ``data_pipeline`` < ``run`` < ``ensemble`` < ``export``
< ``study``; ``usecases`` (the Python API: train, export, study, ...) sits on top. Each package's
``__init__`` maps its modules."""
