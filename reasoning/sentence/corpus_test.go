package sentence

// moreCorpus extends corpus to over a hundred tricky cases.
var moreCorpus = []struct {
	text string
	want []string
}{
	// Decimals, numbers, money, versions, times.
	{"Pi is 3.14159. Tau is twice that.", []string{"Pi is 3.14159.", "Tau is twice that."}},
	{"It rose 0.5%. Then it fell.", []string{"It rose 0.5%.", "Then it fell."}},
	{"Costs €12.50 today. Tomorrow more.", []string{"Costs €12.50 today.", "Tomorrow more."}},
	{"Use Go 1.26 or later. Older fails.", []string{"Use Go 1.26 or later.", "Older fails."}},
	{"Meet at 10.30 sharp. Do not be late.", []string{"Meet at 10.30 sharp.", "Do not be late."}},
	{"The score was 3-2. A close game.", []string{"The score was 3-2.", "A close game."}},
	{"About 1,000.5 km. Far.", []string{"About 1,000.5 km.", "Far."}},
	{"IP 192.168.1.1 is local. Fine.", []string{"IP 192.168.1.1 is local.", "Fine."}},
	{"It is -4.5 °C outside. Brr.", []string{"It is -4.5 °C outside.", "Brr."}},
	{"Chapter 2.3 covers it. Read it.", []string{"Chapter 2.3 covers it.", "Read it."}},
	// Abbreviations and initials.
	{"Ask Mrs. Dalloway. She knows.", []string{"Ask Mrs. Dalloway.", "She knows."}},
	{"Prof. Xavier teaches. Students listen.", []string{"Prof. Xavier teaches.", "Students listen."}},
	{"Apples, pears, etc. are fruit. Nice.", []string{"Apples, pears, etc. are fruit.", "Nice."}},
	{"Cats vs. dogs is old. Both are fine.", []string{"Cats vs. dogs is old.", "Both are fine."}},
	{"See fig. 3 below. It shows the trend.", []string{"See fig. 3 below.", "It shows the trend."}},
	{"Cf. the appendix. Then decide.", []string{"Cf. the appendix.", "Then decide."}},
	{"Martin Luther King Jr. spoke. People listened.", []string{"Martin Luther King Jr. spoke.", "People listened."}},
	{"Acme Inc. was founded early. It grew.", []string{"Acme Inc. was founded early.", "It grew."}},
	{"Call at 9 p.m. tonight. Thanks.", []string{"Call at 9 p.m. tonight.", "Thanks."}},
	{"The U.S. economy grew. Markets rose.", []string{"The U.S. economy grew.", "Markets rose."}},
	{"St. Louis is a city. It has an arch.", []string{"St. Louis is a city.", "It has an arch."}},
	{"No. 5 is my favourite. Chanel.", []string{"No. 5 is my favourite.", "Chanel."}},
	{"E. coli is a bacterium. Wash hands.", []string{"E. coli is a bacterium.", "Wash hands."}},
	{"Approx. two hours remain. Hurry.", []string{"Approx. two hours remain.", "Hurry."}},
	{"Ask Dr. J. Watson. He knows.", []string{"Ask Dr. J. Watson.", "He knows."}},
	// Ellipses.
	{"Well... I am not sure. Maybe.", []string{"Well... I am not sure.", "Maybe."}},
	{"And then... Silence.", []string{"And then...", "Silence."}},
	{"Hmm… let me think. Yes.", []string{"Hmm… let me think.", "Yes."}},
	{"Loading.... done. Next.", []string{"Loading.... done.", "Next."}},
	{"Wait for it...", []string{"Wait for it..."}},
	// URLs, paths, e-mail, files.
	{"Go to https://example.com/docs. It explains.", []string{"Go to https://example.com/docs.", "It explains."}},
	{"Open www.example.org now. Then log in.", []string{"Open www.example.org now.", "Then log in."}},
	{"Mail me at a.b@example.com today. Thanks.", []string{"Mail me at a.b@example.com today.", "Thanks."}},
	{"Edit config.yaml first. Then restart.", []string{"Edit config.yaml first.", "Then restart."}},
	{"Run ./scripts/test now. It takes a minute.", []string{"Run ./scripts/test now.", "It takes a minute."}},
	{"The file is in /etc/hosts. Check it.", []string{"The file is in /etc/hosts.", "Check it."}},
	// Lists.
	{"Do this:\n1. Wash.\n2. Dry.\n3. Fold.", []string{"Do this:\n1. Wash.", "2. Dry.", "3. Fold."}},
	{"Options:\na. Tea.\nb. Coffee.", []string{"Options:\na. Tea.", "b. Coffee."}},
	{"- First item.\n- Second item.", []string{"- First item.", "- Second item."}},
	{"Step 1. Mix well. Step 2. Bake.", []string{"Step 1. Mix well.", "Step 2. Bake."}},
	// Code.
	{"Call `os.Exit(1)` to quit. Or return.", []string{"Call `os.Exit(1)` to quit.", "Or return."}},
	{"The method `a.b.c()` works. Try it.", []string{"The method `a.b.c()` works.", "Try it."}},
	{"Example:\n```go\nfmt.Println(\"Hi. There.\")\n```\nDone.", []string{"Example:\n```go\nfmt.Println(\"Hi. There.\")\n```\nDone."}},
	{"Type `ls -la`. See the files.", []string{"Type `ls -la`.", "See the files."}},
	{"Use `x := 1.5` here. Then print.", []string{"Use `x := 1.5` here.", "Then print."}},
	// Quotes and brackets.
	{"She asked, \"Why?\" He shrugged.", []string{"She asked, \"Why?\"", "He shrugged."}},
	{"It is (mostly) done. Ship it.", []string{"It is (mostly) done.", "Ship it."}},
	{"(This is an aside.) Back to it.", []string{"(This is an aside.)", "Back to it."}},
	{"He said “good night.” She left.", []string{"He said “good night.”", "She left."}},
	{"Is it 'done.' or not? Unclear.", []string{"Is it 'done.' or not?", "Unclear."}},
	{"[See note.] Continue.", []string{"[See note.]", "Continue."}},
	// Emphasis and markdown.
	{"This is *very* important. Listen.", []string{"This is *very* important.", "Listen."}},
	{"__Warning.__ Hot surface.", []string{"__Warning.__", "Hot surface."}},
	{"**Note:** save first. Then quit.", []string{"**Note:** save first.", "Then quit."}},
	{"# Title\n\nFirst line here.", []string{"# Title", "First line here."}},
	// Exclamations, questions, interrobangs, repeats.
	{"Wow! Amazing! Great!", []string{"Wow!", "Amazing!", "Great!"}},
	{"Really?? Yes!!", []string{"Really??", "Yes!!"}},
	{"Is it? It is.", []string{"Is it?", "It is."}},
	{"Stop!Now.", []string{"Stop!Now."}},
	{"What?! No way.", []string{"What?!", "No way."}},
	// Paragraphs and newlines.
	{"One line\nsame sentence. Next.", []string{"One line\nsame sentence.", "Next."}},
	{"Para one.\n\nPara two.", []string{"Para one.", "Para two."}},
	{"Heading\n\n\nBody text.", []string{"Heading", "Body text."}},
	{"End.\n", []string{"End."}},
	{"  Leading spaces. Trailing.  ", []string{"Leading spaces.", "Trailing."}},
	// Unicode and other scripts.
	{"Ça va. Très bien.", []string{"Ça va.", "Très bien."}},
	{"Größe 3.5 m. Gut.", []string{"Größe 3.5 m.", "Gut."}},
	{"Это тест. Второе.", []string{"Это тест.", "Второе."}},
	{"Great job 🎉. Next task.", []string{"Great job 🎉.", "Next task."}},
	{"¿Qué tal? Bien.", []string{"¿Qué tal?", "Bien."}},
	// Single words, short, empty-ish.
	{"Yes.", []string{"Yes."}},
	{"Ok", []string{"Ok"}},
	{"A. B.", []string{"A. B."}},
	{"I. Me. Myself.", []string{"I. Me.", "Myself."}},
	{"Done. ", []string{"Done."}},
	// Mixed tricky.
	{"At 3 p.m. Dr. Who arrived. The end.", []string{"At 3 p.m. Dr. Who arrived.", "The end."}},
	{"Version v2.18.1 (see https://x.io/a.b) is out. Upgrade!", []string{"Version v2.18.1 (see https://x.io/a.b) is out.", "Upgrade!"}},
	{"It's 24 °C... nice, right? Yes.", []string{"It's 24 °C... nice, right?", "Yes."}},
	{"Mr. and Mrs. Smith left at 5.30. Quiet now.", []string{"Mr. and Mrs. Smith left at 5.30.", "Quiet now."}},
	{"e.g. this, i.e. that. Both.", []string{"e.g. this, i.e. that.", "Both."}},
	{"1. Go.\n2. Stop.", []string{"1. Go.", "2. Stop."}},
	{"Temperature: 24.5°C. Humidity: 60%.", []string{"Temperature: 24.5°C.", "Humidity: 60%."}},
	{"Answer = 42. QED.", []string{"Answer = 42.", "QED."}},
	{"Rate is 3.5/5. Good.", []string{"Rate is 3.5/5.", "Good."}},
}
