"""The images a request carries or asks for: ``uploads`` (size and type
checks of an uploaded query or item), ``upload_storage`` (the added images kept beside the index),
``thumbnails`` (their previews) and ``item_images`` (an item's image at full size).
"""
