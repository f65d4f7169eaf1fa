"""The `cascade` command (`main.py`): serve and worker start the processes of
`cascade_process`; replay and events read the log; everything else goes through the API
(`client.py`, found by `locate.py`), as the web app does."""
