"""The model-agnostic EM loop (:mod:`.driver`) and random starts (:mod:`.starts`)."""
