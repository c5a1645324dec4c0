import AuthflowCLI

await Authflow.main()
