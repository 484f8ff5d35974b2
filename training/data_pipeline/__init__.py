"""Images in, tensors out: ``transforms`` (the train augmentation and the eval preprocessing that
``model.json`` records), ``image_dataset`` (a Dataset over ``ImageRecord``s that survives images going
bad), ``batch_sampler`` (class-balanced C x M and shuffled batches), ``data_loaders`` (the DataLoaders
of a run), ``class_grouping`` (DREML meta-classes) and ``run_data`` (load, scan and split a run's
records before the first step)."""
